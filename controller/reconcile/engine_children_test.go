package reconcile

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/example/inferenceservice-operator/crd"
)

// TestSGLangModelsChildren: an SGLang model through DesiredChildren, as spec.engine gives it: the
// HPA on SGLang's queue, KEDA's query and the picker on SGLang's series.
func TestSGLangModelsChildren(t *testing.T) {
	w := newWorld(3)
	ext := w.ext
	ext.Engine = "sglang"
	b, _ := json.Marshal(ext)
	w.isvc.Annotations = map[string]string{crd.AnnotationV1beta1Spec: string(b)}
	d := DesiredChildren(w.isvc, &ext, Features{})
	if m := d.HPA.Spec.Metrics[0].Pods.Metric.Name; m != "num_queue_reqs" {
		t.Fatalf("HPA metric %s", m)
	}
	so := DesiredChildren(w.isvc, &ext, kedaOn).ScaledObject
	if q := so.Object["spec"].(map[string]interface{})["triggers"].([]interface{})[0].(map[string]interface{})["metadata"].(map[string]interface{})["query"].(string); !strings.HasPrefix(q, "sum(sglang:num_queue_reqs{") {
		t.Fatalf("query %s", q)
	}
	if args := PickerArgs(w.isvc, w.f); !strings.Contains(strings.Join(args, " "), "queuedRequestsSpec: \"sglang:num_queue_reqs\"") {
		t.Fatalf("picker args %v", args)
	}
}
