package custommetrics

import (
	"context"
	"encoding/base64"
	"fmt"
	"reflect"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Group is the API the HPA controller reads Pods metrics from.
const Group = "custom.metrics.k8s.io"

// Versions are registered newest first; the HPA controller asks for the preferred one.
var Versions = []struct {
	Version  string
	Priority int64
}{{"v1beta2", 200}, {"v1beta1", 100}}

// NewAPIServiceInfo is the adapter's series of who serves each custom.metrics.k8s.io version
// (defined here, beside what it reports, so docs/metrics.md's test sees it; the adapter's main
// registers it).
func NewAPIServiceInfo() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "inferenceservice", Subsystem: "metrics_adapter", Name: "apiservice_info",
		Help: "Who serves each custom.metrics.k8s.io version: served_by is \"self\" when this adapter's APIService does, else the other component's Service.",
	}, []string{"apiservice", "served_by"})
}

// ManagedByLabel marks the APIServices this adapter registered, the only ones it ever changes.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "inferenceservice-metrics-adapter"
)

var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// Backend is the Service the aggregator sends the API's requests to, and the CA its serving
// certificate is verified against.
type Backend struct {
	Namespace, Name string
	Port            int32
	// CABundle (PEM) becomes the APIServices' caBundle; empty, they skip TLS verification
	// (each replica's own self-signed certificate), which the shipped admission policy refuses.
	CABundle []byte
}

// Registration is what Register found and did for one version.
type Registration struct {
	Name string
	// Action is "created", "updated", "unchanged" or "left": another component serves it.
	Action string
	// ServedBy is the Service (namespace/name) or "local" serving the version when it is not ours.
	ServedBy string
}

// Register makes the aggregator send custom.metrics.k8s.io to backend: each version's
// APIService is created when absent and kept in shape when this adapter made it; one made by
// anything else (prometheus-adapter, another operator) is left exactly as it is. Each one it
// makes is owned by owner, a cluster-scoped object of the install (its ClusterRole), so the
// garbage collector removes them with the install: helm uninstall, kubectl delete -k, or a
// switch of metric source, none of which knows about objects made at run time.
func Register(ctx context.Context, client dynamic.Interface, backend Backend, owner metav1.OwnerReference) ([]Registration, error) {
	var out []Registration
	for _, v := range Versions {
		want := desired(v.Version, v.Priority, backend, owner)
		reg, err := registerOne(ctx, client.Resource(apiServices), want)
		if err != nil {
			return out, fmt.Errorf("APIService %s: %w", want.GetName(), err)
		}
		out = append(out, reg)
	}
	return out, nil
}

func registerOne(ctx context.Context, c dynamic.NamespaceableResourceInterface, want *unstructured.Unstructured) (Registration, error) {
	reg := Registration{Name: want.GetName()}
	got, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := c.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return reg, err
		} else if err != nil {
			return registerOne(ctx, c, want) // another replica created it first: read it
		}
		reg.Action = "created"
		return reg, nil
	}
	if err != nil {
		return reg, err
	}
	if got.GetLabels()[ManagedByLabel] != ManagedByValue {
		reg.Action, reg.ServedBy = "left", servedBy(got)
		return reg, nil
	}
	spec, _, _ := unstructured.NestedMap(got.Object, "spec")
	wantSpec, _, _ := unstructured.NestedMap(want.Object, "spec")
	if equalSpec(spec, wantSpec) && reflect.DeepEqual(got.GetOwnerReferences(), want.GetOwnerReferences()) {
		reg.Action = "unchanged"
		return reg, nil
	}
	updated := got.DeepCopy()
	updated.Object["spec"] = wantSpec
	updated.SetOwnerReferences(want.GetOwnerReferences())
	if _, err := c.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return reg, err
	}
	reg.Action = "updated"
	return reg, nil
}

// equalSpec compares the fields this adapter sets; the API server defaults none in an
// APIService spec, and JSON numbers decode as int64 as the desired ones are written.
func equalSpec(got, want map[string]interface{}) bool { return reflect.DeepEqual(got, want) }

func servedBy(apiService *unstructured.Unstructured) string {
	ns, _, _ := unstructured.NestedString(apiService.Object, "spec", "service", "namespace")
	name, _, _ := unstructured.NestedString(apiService.Object, "spec", "service", "name")
	if name == "" {
		return "local"
	}
	return ns + "/" + name
}

func desired(version string, priority int64, b Backend, owner metav1.OwnerReference) *unstructured.Unstructured {
	spec := map[string]interface{}{
		"group":                Group,
		"version":              version,
		"groupPriorityMinimum": int64(100),
		"versionPriority":      priority,
		"service": map[string]interface{}{
			"namespace": b.Namespace,
			"name":      b.Name,
			"port":      int64(b.Port),
		},
	}
	if len(b.CABundle) > 0 {
		// The aggregator verifies the adapter's certificate for <service>.<namespace>.svc.
		spec["caBundle"] = base64.StdEncoding.EncodeToString(b.CABundle)
	} else {
		// Each replica serves its own self-signed certificate, as metrics-server does.
		spec["insecureSkipTLSVerify"] = true
	}
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata": map[string]interface{}{
			"name":   version + "." + Group,
			"labels": map[string]interface{}{ManagedByLabel: ManagedByValue},
		},
		"spec": spec,
	}}
	u.SetOwnerReferences([]metav1.OwnerReference{owner})
	return u
}
