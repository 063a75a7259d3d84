package crd

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// FromUnstructured converts an object from the dynamic informer's cache into a new typed
// InferenceService. The cache object is only read, never modified.
func FromUnstructured(u *unstructured.Unstructured) (*InferenceService, error) {
	var isvc InferenceService
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &isvc); err != nil {
		return nil, fmt.Errorf("decoding %s %s/%s: %w", Kind, u.GetNamespace(), u.GetName(), err)
	}
	return &isvc, nil
}

// StatusToUnstructured renders a status for a write through the status subresource.
func StatusToUnstructured(s *InferenceServiceStatus) (map[string]interface{}, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(s)
}

var (
	dns1035   = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	noSpaces  = regexp.MustCompile(`^\S+$`)
	maxString = 512
)

// Validate repeats, as pure code, the rules the API server enforces through the CRD's schema
// and CEL, so an object stored before a rule existed is reported instead of acted upon.
func Validate(isvc *InferenceService) error {
	var errs []string
	if n := isvc.Name; len(n) > MaxNameLength || !dns1035.MatchString(n) {
		errs = append(errs, fmt.Sprintf("metadata.name %q must be a DNS-1035 label of at most %d characters", n, MaxNameLength))
	}
	s := &isvc.Spec
	switch {
	case s.Model == "":
		errs = append(errs, "spec.model is required")
	case len(s.Model) > maxString || !noSpaces.MatchString(s.Model):
		errs = append(errs, fmt.Sprintf("spec.model must be 1-%d characters without whitespace", maxString))
	case strings.HasPrefix(s.Model, "-"):
		errs = append(errs, "spec.model must not start with '-'")
	}
	if s.Replicas < 0 || s.Replicas > MaxReplicas {
		errs = append(errs, fmt.Sprintf("spec.replicas %d must be between 0 and %d", s.Replicas, MaxReplicas))
	}
	if g := s.GPUs(); g < 0 || g > MaxGPUsPerReplica {
		errs = append(errs, fmt.Sprintf("spec.gpusPerReplica %d must be between 0 and %d", g, MaxGPUsPerReplica))
	}
	if s.Image != "" && (len(s.Image) > maxString || !noSpaces.MatchString(s.Image)) {
		errs = append(errs, fmt.Sprintf("spec.image must be 1-%d characters without whitespace", maxString))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid %s: %s", Kind, strings.Join(errs, "; "))
}
