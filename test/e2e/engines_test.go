package e2e

import (
	"strings"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/controller/engine/sglang"
	"github.com/example/inferenceservice-operator/crd"
)

// engineCase is what a test that runs for every engine needs of one: the words that differ,
// read from the engine's package where it has them, so a test asserts the same behaviour in
// each engine's own terms.
type engineCase struct {
	name string
	eng  engine.Engine
	// slots is the engine's flag bounding the requests one pod runs at once.
	slots string
	// unknownArg is argparse's refusal of --foo, as the engine's parser prints it.
	unknownArg string
}

// engines are the engines every table-driven e2e test runs for: vLLM first (the default).
var engines = []engineCase{
	{name: engine.VLLM, eng: engine.For(engine.VLLM), slots: "--max-num-seqs", unknownArg: "vllm: error: unrecognized arguments: --foo"},
	{name: sglang.Name, eng: engine.For(sglang.Name), slots: "--max-running-requests", unknownArg: "launch_server.py: error: unrecognized arguments: --foo"},
}

// metric is the queue's name in the custom metrics API, as the HPA names it for the engine.
func (e engineCase) metric() string { return e.eng.Metrics().QueueName }

// v1beta1Fields is the v1beta1 spec a v1alpha1 object carries in its annotation, with the
// engine added when it is not the default; fields is a JSON object's members, or "".
func (e engineCase) v1beta1Fields(fields string) string {
	var parts []string
	if e.name != engine.VLLM {
		parts = append(parts, `"engine":"`+e.name+`"`)
	}
	if fields != "" {
		parts = append(parts, fields)
	}
	if len(parts) == 0 {
		return ""
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// meta is a v1alpha1 object's metadata line naming it and carrying v1beta1Fields(fields).
func (e engineCase) meta(name, fields string) string {
	if ann := e.v1beta1Fields(fields); ann != "" {
		return "metadata: {name: " + name + ", annotations: {" + crd.AnnotationV1beta1Spec + ": '" + ann + "'}}"
	}
	return "metadata: {name: " + name + "}"
}

// hasSeries reports whether a /metrics page has a sample of series labelled with the model.
func hasSeries(page, series, model string) bool {
	for _, l := range strings.Split(page, "\n") {
		if rest, ok := strings.CutPrefix(l, series+"{"); ok && strings.Contains(rest, `model_name="`+model+`"`) {
			return true
		}
	}
	return false
}
