package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/process/servingcert"
	"github.com/example/inferenceservice-operator/crd"
)

// FieldManager names the operator's caBundle writes.
const FieldManager = "inferenceservice-operator-webhook"

// EnsureCABundle adds ca to the CRD's conversion webhook caBundle when the CRD converts with a
// webhook and the bundle lacks it; with strategy None there is nothing to do. It reports
// whether it patched.
func EnsureCABundle(ctx context.Context, dyn dynamic.Interface, ca []byte, now time.Time) (bool, error) {
	u, err := dyn.Resource(crd.CRDResource).Get(ctx, crd.CRDName, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading CRD %s: %w", crd.CRDName, err)
	}
	if s, _, _ := unstructured.NestedString(u.Object, "spec", "conversion", "strategy"); s != "Webhook" {
		return false, nil
	}
	current, _, _ := unstructured.NestedString(u.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	var have []byte
	if current != "" {
		if err := json.Unmarshal([]byte(`"`+current+`"`), &have); err != nil {
			have = nil // not base64: replace it
		}
	}
	want := servingcert.MergeBundle(have, ca, now)
	if bytes.Equal(have, want) {
		return false, nil
	}
	// The resourceVersion makes the patch fail on a concurrent change (another replica), so a
	// retry re-reads and merges instead of dropping the other replica's CA.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": u.GetResourceVersion()},
		"spec":     map[string]any{"conversion": map[string]any{"webhook": map[string]any{"clientConfig": map[string]any{"caBundle": want}}}},
	})
	if err != nil {
		return false, err
	}
	if _, err := dyn.Resource(crd.CRDResource).Patch(ctx, crd.CRDName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return false, fmt.Errorf("patching caBundle of CRD %s: %w", crd.CRDName, err)
	}
	return true, nil
}

// SyncCABundle runs EnsureCABundle now and every period until ctx is done, so a CRD applied
// or replaced after the operator started gets the CA too. Errors are logged and retried.
func SyncCABundle(ctx context.Context, dyn dynamic.Interface, ca []byte, period time.Duration) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		patched, err := EnsureCABundle(ctx, dyn, ca, time.Now())
		switch {
		case err != nil:
			klog.ErrorS(err, "Cannot write the conversion webhook's CA bundle")
		case patched:
			klog.InfoS("Wrote the conversion webhook's CA bundle", "crd", crd.CRDName)
		}
	}, period)
}
