package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// foreignFinalizer is another controller's: the upgrade must keep it where it is.
const foreignFinalizer = "example.com/upgrade-hold"

// renderedCRD is the InferenceService CRD `kubectl kustomize` renders from dir (relative to
// the repository), as an install applies it.
func renderedCRD(t *testing.T, dir string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	out := env.Kubectl(t, "kustomize", filepath.Join(env.Root, dir))
	for _, doc := range strings.Split(out, "\n---\n") {
		var c apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
			t.Fatal(err)
		}
		if c.Kind == "CustomResourceDefinition" && c.Name == crd.CRDName {
			return &c
		}
	}
	t.Fatalf("no CRD %s in kubectl kustomize %s", crd.CRDName, dir)
	return nil
}

// useDefaultInstallCRD is useWebhookCRD applying the CRD the default install renders (kubectl
// kustomize manifests/), its webhook Service swapped for the operator's loopback URL: the local
// cluster's Services lead nowhere.
func useDefaultInstallCRD(t *testing.T) *webhookInstall {
	t.Helper()
	return useCRD(t, func(w *webhookInstall) *apiextensionsv1.CustomResourceDefinition {
		def := renderedCRD(t, "manifests")
		if def.Spec.Conversion == nil || def.Spec.Conversion.Webhook == nil || def.Spec.Conversion.Webhook.ClientConfig == nil || def.Spec.Conversion.Webhook.ClientConfig.Service == nil {
			t.Fatalf("the default install's CRD converts with %+v; want its webhook Service", def.Spec.Conversion)
		}
		want := w.definition()
		def.Spec.Conversion.Webhook.ClientConfig = want.Spec.Conversion.Webhook.ClientConfig
		def.Labels, def.Annotations = nil, nil
		if !reflect.DeepEqual(def.Spec, want.Spec) {
			t.Fatal("the default install's CRD differs from crd.DefinitionWithV1beta1 beyond the webhook's address")
		}
		return def
	})
}

// whole is what an object is to its users: its identity, labels, annotations, finalizers, spec
// and status; what the API server bumps on any write (resourceVersion, managedFields) is not.
func whole(u *unstructured.Unstructured) map[string]any {
	return map[string]any{
		"apiVersion": u.GetAPIVersion(), "uid": u.GetUID(), "name": u.GetName(), "namespace": u.GetNamespace(),
		"creationTimestamp": u.GetCreationTimestamp().UTC().Format(time.RFC3339), "generation": u.GetGeneration(),
		"labels": u.GetLabels(), "annotations": u.GetAnnotations(), "finalizers": u.GetFinalizers(),
		"spec": u.Object["spec"], "status": u.Object["status"],
	}
}

// convertWhole is u converted to apiVersion by the operator's own conversion, as whole reads it.
func convertWhole(t *testing.T, u *unstructured.Unstructured, apiVersion string) map[string]any {
	t.Helper()
	raw, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	out, err := crd.Convert(raw, apiVersion)
	if err != nil {
		t.Fatal(err)
	}
	// Unstructured's own decoding: integers stay int64, as the API server's reads give them.
	var c unstructured.Unstructured
	if err := c.UnmarshalJSON(out); err != nil {
		t.Fatal(err)
	}
	return whole(&c)
}

// TestUpgradeFromV1alpha1Default: an install of the previous default (the CRD serving and
// storing v1alpha1 alone, no webhook) holds objects with labels, annotations, another
// controller's finalizer and the operator's status; the new default's CRD (kubectl kustomize
// manifests/, its webhook reached by URL on loopback) is applied and the operator restarted with
// its webhook, as an upgrade does. The leader migrates every object to v1beta1 storage; each
// reads back whole in v1alpha1 and, in v1beta1, as the operator's conversion of what was
// written. Then the documented rollback: storage back to v1alpha1 with both served, then
// manifests/overlays/v1alpha1's CRD; every object, and one written as v1beta1 after the upgrade
// (env from a Secret), reads back whole again.
func TestUpgradeFromV1alpha1Default(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	res := env.Dyn.Resource(crd.Resource).Namespace(ns)
	t.Cleanup(func() {
		// The foreign finalizer goes first, or the namespace never ends.
		list, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("listing for cleanup: %v", err)
			return
		}
		for i := range list.Items {
			u := &list.Items[i]
			if f := u.GetFinalizers(); slices.Contains(f, foreignFinalizer) {
				u.SetFinalizers(slices.DeleteFunc(slices.Clone(f), func(s string) bool { return s == foreignFinalizer }))
				if _, err := res.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
					t.Logf("dropping %s's finalizer: %v", u.GetName(), err)
				}
			}
		}
		env.Kubectl(t, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=120s")
	})

	// The suite runs on the previous default's CRD (manifests/crd): v1alpha1 alone.
	waitStoredVersions(t, time.Minute, crd.Version)
	objects := []struct {
		name string
		spec map[string]any
		meta func(u *unstructured.Unstructured)
	}{
		{"plain", map[string]any{"model": "m/plain", "replicas": int64(1), "gpusPerReplica": int64(0), "image": scheduleImage}, nil},
		{"labelled", map[string]any{"model": "m/labelled", "replicas": int64(2), "gpusPerReplica": int64(0), "image": scheduleImage,
			"resources": map[string]any{"requests": map[string]any{"cpu": "1", "memory": "1Gi"}}}, func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"team": "search", "tier": "online"})
			u.SetAnnotations(map[string]string{"example.com/owner": "search-infra", "example.com/note": "written under v1alpha1"})
		}},
		{"held", map[string]any{"model": "m/held", "replicas": int64(1), "gpusPerReplica": int64(0), "image": scheduleImage}, func(u *unstructured.Unstructured) {
			u.SetFinalizers([]string{foreignFinalizer})
			u.SetAnnotations(map[string]string{"example.com/why": "another controller holds it"})
		}},
		{"at-zero", map[string]any{"model": "m/zero", "replicas": int64(0), "gpusPerReplica": int64(0), "image": scheduleImage}, func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"team": "batch"})
		}},
	}
	for _, o := range objects {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
			"metadata": map[string]any{"name": o.name, "namespace": ns}, "spec": o.spec}}
		if o.meta != nil {
			o.meta(u)
		}
		if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The operator's status settles: Ready (at zero, whatever it says of zero).
	before := map[string]*unstructured.Unstructured{}
	testenv.Eventually(t, 3*time.Minute, "every object's status settled", func() error {
		for _, o := range objects {
			u, err := res.Get(ctx, o.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			ready := nested(u, "status", "phase") == string(crd.PhaseReady) || o.spec["replicas"] == int64(0)
			if !ready || nested(u, "status", "observedGeneration") != u.GetGeneration() {
				return fmt.Errorf("%s phase %v, observed generation %v", o.name, nested(u, "status", "phase"), nested(u, "status", "observedGeneration"))
			}
			before[o.name] = u
		}
		return nil
	})
	storedAs := func(name string) string { return storedVersion(t, ns, name) }
	children := map[string]types.UID{}
	for name := range before {
		if got := storedAs(name); got != crd.GroupVersion.String() {
			t.Fatalf("before the upgrade %s is stored as %s", name, got)
		}
		if d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			children[name] = d.UID
		}
	}
	// A settled status must stay as it is: wait a few operator resyncs, then take the reference.
	settle := time.Now().Add(3 * env.resync)
	testenv.Eventually(t, time.Minute, "statuses unchanged over three resyncs", func() error {
		for name, b := range before {
			u, err := res.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(whole(u), whole(b)) {
				before[name] = u
				settle = time.Now().Add(3 * env.resync)
				return fmt.Errorf("%s still changing", name)
			}
		}
		if time.Now().Before(settle) {
			return fmt.Errorf("%s to go", time.Until(settle).Round(time.Second))
		}
		return nil
	})

	// The upgrade: the new default's CRD, its Service swapped for the webhook's loopback URL.
	start := time.Now()
	w := useDefaultInstallCRD(t)
	waitStoredVersions(t, 2*time.Minute, crd.VersionV1beta1)
	t.Logf("upgrade: %d objects migrated, storedVersions [v1beta1] %.1fs after the new default's CRD", len(before), time.Since(start).Seconds())
	// Each object read whole: as v1alpha1, what was written, but for the status only v1beta1
	// holds (endpoint, modelName), which the operator writes once it watches v1beta1 and
	// v1alpha1 carries in its v1beta1-status annotation; as v1beta1, the operator's conversion of
	// that v1alpha1 read, so the two views agree.
	checkAlpha := func(stage, name string, withStatus bool) *unstructured.Unstructured {
		t.Helper()
		alpha, err := getVersion(t, false, ns, name)
		if err != nil {
			t.Fatalf("%s: %s in v1alpha1: %v", stage, name, err)
		}
		got, want := whole(alpha), whole(before[name])
		ann := maps.Clone(alpha.GetAnnotations())
		if kept := ann[crd.AnnotationV1beta1Status]; kept != "" {
			var extra map[string]any
			if err := json.Unmarshal([]byte(kept), &extra); err != nil {
				t.Fatalf("%s: %s's %s: %v", stage, name, crd.AnnotationV1beta1Status, err)
			}
			for k := range extra {
				if k != "endpoint" && k != "modelName" {
					t.Errorf("%s: %s's v1alpha1 view carries v1beta1 status %q: %s", stage, name, k, kept)
				}
			}
			delete(ann, crd.AnnotationV1beta1Status)
		}
		got["annotations"] = ann
		if len(ann) == 0 {
			got["annotations"] = want["annotations"]
		}
		if !withStatus {
			delete(got, "status")
			delete(want, "status")
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %s read as v1alpha1 is not what was written:\n got %v\nwant %v", stage, name, got, want)
		}
		return alpha
	}
	check := func(stage string) {
		t.Helper()
		for name := range before {
			alpha := checkAlpha(stage, name, true)
			beta, err := getVersion(t, true, ns, name)
			if err != nil {
				t.Fatalf("%s: %s in v1beta1: %v", stage, name, err)
			}
			if got, want := whole(beta), convertWhole(t, alpha, crd.GroupVersionV1beta1.String()); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s read as v1beta1 is not the conversion of its v1alpha1 read:\n got %v\nwant %v", stage, name, got, want)
			}
			if uid, ok := children[name]; ok {
				if d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err != nil || d.UID != uid {
					t.Errorf("%s: %s's Deployment replaced or gone: %v", stage, name, err)
				}
			}
		}
	}
	for name := range before {
		if got := storedAs(name); got != crd.GroupVersionV1beta1.String() {
			t.Fatalf("after the upgrade %s is stored as %s", name, got)
		}
	}
	check("after the upgrade")

	// Written after the upgrade, in v1beta1 alone: env from a Secret.
	beta := &unstructured.Unstructured{Object: map[string]any{"apiVersion": crd.GroupVersionV1beta1.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": "written-as-beta", "namespace": ns, "labels": map[string]any{"team": "search"}},
		"spec": map[string]any{"baseModel": "m/beta", "replicas": int64(1), "gpusPerReplica": int64(0), "image": scheduleImage,
			"env": []any{map[string]any{"name": "HF_TOKEN", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "hf", "key": "token"}}}}}}}
	if _, err := env.Dyn.Resource(crd.ResourceV1beta1).Namespace(ns).Create(ctx, beta, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var betaWritten *unstructured.Unstructured
	testenv.Eventually(t, 2*time.Minute, "the v1beta1 object's status", func() error {
		u, err := getVersion(t, true, ns, "written-as-beta")
		if err != nil {
			return err
		}
		if nested(u, "status", "observedGeneration") != u.GetGeneration() {
			return fmt.Errorf("observed generation %v", nested(u, "status", "observedGeneration"))
		}
		betaWritten = u
		return nil
	})

	// The rollback, as docs/operations.md gives it: storage back to v1alpha1 with both versions
	// served (the operator rewrites every object), then the v1alpha1-only CRD.
	start = time.Now()
	w.rollBack(t)
	for name := range before {
		if got := storedAs(name); got != crd.GroupVersion.String() {
			t.Fatalf("after the rollback %s is stored as %s", name, got)
		}
	}
	check("storage rolled back")
	if u, err := getVersion(t, true, ns, "written-as-beta"); err != nil {
		t.Fatal(err)
	} else if got, want := whole(u), whole(betaWritten); !reflect.DeepEqual(got["spec"], want["spec"]) || !reflect.DeepEqual(got["labels"], want["labels"]) || got["uid"] != want["uid"] {
		t.Errorf("the v1beta1 object after the rollback of storage:\n got %v\nwant %v", got, want)
	}
	if got := storedAs("written-as-beta"); got != crd.GroupVersion.String() {
		t.Fatalf("after the rollback written-as-beta is stored as %s", got)
	}
	if got := renderedCRD(t, "manifests/overlays/v1alpha1"); !reflect.DeepEqual(got.Spec.Versions, crd.Definition().Spec.Versions) {
		t.Fatal("manifests/overlays/v1alpha1's CRD is not crd.Definition()")
	}
	w.restoreSuiteCRD(t)
	t.Logf("rollback: storedVersions [v1alpha1] and the v1alpha1-only CRD in %.1fs", time.Since(start).Seconds())
	for name := range before {
		// The suite's operator, back, may have written status since; identity, metadata and
		// spec are what the rollback must keep.
		checkAlpha("after the rollback", name, false)
	}
	// The v1beta1-only fields survive as v1alpha1's annotation, and v1beta1 is no longer served.
	if u, err := getVersion(t, false, ns, "written-as-beta"); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(u.GetAnnotations()[crd.AnnotationV1beta1Spec], "HF_TOKEN") {
		t.Errorf("written-as-beta in v1alpha1 lost its env: annotations %v", u.GetAnnotations())
	}
	if _, err := getVersion(t, true, ns, "plain"); err == nil {
		t.Error("v1beta1 still served after the rollback")
	}
}
