package storage

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/example/inferenceservice-operator/crd"
)

// A unit table on the fake dynamic client for the decisions; TestStorageMigration in test/e2e
// proves the rewrite against a real API server and etcd.
func fakeCRD(storage string, stored ...string) *unstructured.Unstructured {
	versions := []interface{}{}
	for _, v := range []string{crd.Version, crd.VersionV1beta1} {
		versions = append(versions, map[string]interface{}{"name": v, "served": true, "storage": v == storage})
	}
	st := []interface{}{}
	for _, s := range stored {
		st = append(st, s)
	}
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]interface{}{"name": crd.CRDName, "resourceVersion": "7"},
		"spec":     map[string]interface{}{"versions": versions},
		"status":   map[string]interface{}{"storedVersions": st},
	}}
}

func isvc(version, ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": crd.Group + "/" + version, "kind": crd.Kind,
		"metadata": map[string]interface{}{"name": name, "namespace": ns},
	}}
}

func TestMigrate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		crd        *unstructured.Unstructured
		wantDone   bool
		wantWrites int // isvc updates
	}{
		{"only the storage version stored: nothing", fakeCRD(crd.VersionV1beta1, crd.VersionV1beta1), false, 0},
		{"after the switch to v1beta1: rewrite all, then clear", fakeCRD(crd.VersionV1beta1, crd.Version, crd.VersionV1beta1), true, 3},
		{"rollback to v1alpha1", fakeCRD(crd.Version, crd.Version, crd.VersionV1beta1), true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			storage, _, _ := unstructured.NestedSlice(tc.crd.Object, "spec", "versions")
			v := crd.Version
			for _, x := range storage {
				if x.(map[string]interface{})["storage"].(bool) {
					v = x.(map[string]interface{})["name"].(string)
				}
			}
			gvr := schema.GroupVersionResource{Group: crd.Group, Version: v, Resource: crd.Plural}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
				gvr: crd.Kind + "List", crd.CRDResource: "CustomResourceDefinitionList",
			}, tc.crd, isvc(v, "a", "x"), isvc(v, "a", "y"), isvc(v, "b", "x"))
			res, err := Migrate(context.Background(), dyn)
			if err != nil {
				t.Fatal(err)
			}
			writes := 0
			var patched clienttesting.PatchAction
			for _, a := range dyn.Actions() {
				if a.GetVerb() == "update" && a.GetResource() == gvr {
					writes++
				}
				if p, ok := a.(clienttesting.PatchAction); ok {
					patched = p
				}
			}
			if res.Done != tc.wantDone || writes != tc.wantWrites || res.StorageVersion != v {
				t.Fatalf("done %v writes %d storage %s; want %v %d %s", res.Done, writes, res.StorageVersion, tc.wantDone, tc.wantWrites, v)
			}
			if !tc.wantDone {
				if patched != nil {
					t.Fatal("patched storedVersions with nothing to migrate")
				}
				return
			}
			if patched == nil || patched.GetSubresource() != "status" {
				t.Fatalf("storedVersions not patched through status: %v", patched)
			}
			want := `{"metadata":{"resourceVersion":"7"},"status":{"storedVersions":["` + v + `"]}}`
			if got := string(patched.GetPatch()); !reflect.DeepEqual(got, want) {
				t.Fatalf("patch %s, want %s", got, want)
			}
		})
	}
}
