// The model server a model runs on: the decision reads every word of its engine (flags, command
// line, metric names, log readers) through engine.Engine, never spelling vLLM's itself.

package reconcile

import (
	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
)

// defaultEngine serves every model until the spec names an engine.
var defaultEngine = engine.For(engine.VLLM)

// engineOf is the engine isvc is served by.
func engineOf(*crd.InferenceService) engine.Engine { return defaultEngine }

// server is the default engine's container parts, shared by every model's template.
var server = defaultEngine.Server()
