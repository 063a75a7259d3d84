package crd

import (
	"context"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
)

// The API server's own CRD validation, CEL cost estimation included: a rule or message
// expression over budget is refused at `kubectl apply`, which unit tables would not see.
func TestDefinitionsPassAPIServerValidation(t *testing.T) {
	for name, def := range map[string]*apiextensionsv1.CustomResourceDefinition{
		"v1alpha1":         Definition(),
		"v1alpha1+v1beta1": DefinitionWithV1beta1(InClusterWebhook()),
	} {
		var internal apiextensions.CustomResourceDefinition
		if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(def, &internal, nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, v := range internal.Spec.Versions {
			if v.Storage { // what the API server records on create
				internal.Status.StoredVersions = []string{v.Name}
			}
		}
		for _, e := range validation.ValidateCustomResourceDefinition(context.Background(), &internal) {
			t.Errorf("%s: %v", name, e)
		}
	}
}
