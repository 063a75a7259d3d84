package custommetrics

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

var (
	ours  = Backend{Namespace: "inferenceservice-system", Name: "inferenceservice-metrics-adapter", Port: 443, CABundle: []byte("-----BEGIN CERTIFICATE-----\n")}
	owner = metav1.OwnerReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "inferenceservice-metrics-adapter", UID: "uid-1"}
)

func fakeClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{apiServices: "APIServiceList"}, objs...)
}

func writes(c *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range c.Actions() {
		if a.GetVerb() != "get" {
			out = append(out, a.GetVerb()+" "+a.(interface{ GetObject() runtime.Object }).GetObject().(*unstructured.Unstructured).GetName())
		}
	}
	return out
}

func TestRegisterCreatesThenKeeps(t *testing.T) {
	c := fakeClient()
	regs, err := Register(context.Background(), c, ours, owner)
	if err != nil || len(regs) != 2 || regs[0].Action != "created" || regs[1].Action != "created" {
		t.Fatalf("first Register: %+v, %v", regs, err)
	}
	got, err := c.Resource(apiServices).Get(context.Background(), "v1beta2.custom.metrics.k8s.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc, _, _ := unstructured.NestedMap(got.Object, "spec", "service"); svc["name"] != ours.Name || svc["port"] != int64(443) {
		t.Fatalf("spec.service %v", svc)
	}

	c.ClearActions()
	if regs, err := Register(context.Background(), c, ours, owner); err != nil || regs[0].Action != "unchanged" {
		t.Fatalf("second Register: %+v, %v", regs, err)
	}
	if w := writes(c); len(w) != 0 {
		t.Fatalf("a registration already in shape wrote %v", w)
	}

	// Ours, edited by hand: put back.
	got.Object["spec"].(map[string]interface{})["service"].(map[string]interface{})["port"] = int64(8443)
	if _, err := c.Resource(apiServices).Update(context.Background(), got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.ClearActions()
	if regs, err := Register(context.Background(), c, ours, owner); err != nil || regs[0].Action != "updated" {
		t.Fatalf("after a hand edit: %+v, %v", regs, err)
	}
}

func TestRegisterLeavesAnotherComponentsAPIService(t *testing.T) {
	foreign := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]interface{}{"name": "v1beta2.custom.metrics.k8s.io", "labels": map[string]interface{}{"app.kubernetes.io/name": "prometheus-adapter"}},
		"spec":     map[string]interface{}{"group": Group, "version": "v1beta2", "service": map[string]interface{}{"namespace": "monitoring", "name": "prometheus-adapter"}},
	}}
	c := fakeClient(foreign)
	regs, err := Register(context.Background(), c, ours, owner)
	if err != nil {
		t.Fatal(err)
	}
	if regs[0].Action != "left" || regs[0].ServedBy != "monitoring/prometheus-adapter" {
		t.Fatalf("v1beta2: %+v, want left, served by monitoring/prometheus-adapter", regs[0])
	}
	if w := writes(c); len(w) != 1 || w[0] != "create v1beta1.custom.metrics.k8s.io" {
		t.Fatalf("writes %v, want only the absent v1beta1 created", w)
	}
}

func TestRegisterLosesTheCreateRace(t *testing.T) {
	c := fakeClient()
	// Another replica creates it between our get and our create.
	c.PrependReactor("create", "apiservices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject()
		if err := c.Tracker().Create(apiServices, obj, ""); err != nil {
			return true, nil, err
		}
		return true, nil, errAlreadyExists(obj.(*unstructured.Unstructured).GetName())
	})
	regs, err := Register(context.Background(), c, ours, owner)
	if err != nil || regs[0].Action != "unchanged" {
		t.Fatalf("%+v, %v; want the other replica's registration read back as unchanged", regs, err)
	}
}

func errAlreadyExists(name string) error {
	return apierrors.NewAlreadyExists(schema.GroupResource{Group: "apiregistration.k8s.io", Resource: "apiservices"}, name)
}

// What it registers is verified by the install's CA and owned by the install's ClusterRole, so
// the garbage collector removes it with the install; a reinstalled ClusterRole (a new UID) is
// taken as the new owner, and without a CA the API is registered unverified.
func TestRegisterOwnedAndVerified(t *testing.T) {
	c := fakeClient()
	if _, err := Register(context.Background(), c, ours, owner); err != nil {
		t.Fatal(err)
	}
	get := func() *unstructured.Unstructured {
		u, err := c.Resource(apiServices).Get(context.Background(), "v1beta1.custom.metrics.k8s.io", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	u := get()
	if refs := u.GetOwnerReferences(); len(refs) != 1 || refs[0] != owner {
		t.Fatalf("owners %v, want %v", refs, owner)
	}
	ca, _, _ := unstructured.NestedString(u.Object, "spec", "caBundle")
	if _, insecure := u.Object["spec"].(map[string]interface{})["insecureSkipTLSVerify"]; ca != "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==" || insecure {
		t.Fatalf("caBundle %q, insecureSkipTLSVerify set %v", ca, insecure)
	}

	reinstalled := owner
	reinstalled.UID = "uid-2"
	regs, err := Register(context.Background(), c, ours, reinstalled)
	if err != nil || regs[0].Action != "updated" || regs[1].Action != "updated" {
		t.Fatalf("after a reinstall: %+v, %v", regs, err)
	}
	if refs := get().GetOwnerReferences(); len(refs) != 1 || refs[0].UID != "uid-2" {
		t.Fatalf("owners after a reinstall %v", refs)
	}

	noCA := ours
	noCA.CABundle = nil
	if _, err := Register(context.Background(), c, noCA, reinstalled); err != nil {
		t.Fatal(err)
	}
	spec := get().Object["spec"].(map[string]interface{})
	if _, ok := spec["caBundle"]; ok || spec["insecureSkipTLSVerify"] != true {
		t.Fatalf("without a CA: spec %v", spec)
	}
}
