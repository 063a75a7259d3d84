// The flags and variables spec.engineArgs and spec.env may not carry: the engine's own table
// (engine.Engine's RefusedArgs and RefusedEnv), which both the CRD's CEL rules
// (definition_v1beta1.go) and the pure Validate (decode.go) read. The engines the API knows
// are registered by importing their packages here.

package crd

import (
	"github.com/example/inferenceservice-operator/controller/engine"
	_ "github.com/example/inferenceservice-operator/controller/engine/vllm" // vLLM, the engine of every model
)

// OwnedArg is a group of flags refused in spec.engineArgs; OwnedName a variable refused in
// spec.env.
type (
	OwnedArg  = engine.OwnedArg
	OwnedName = engine.OwnedName
)

// OwnedArgs are refused in spec.engineArgs, each group by its own CEL rule;
// OwnedArgsWithAdapters only while spec.adapters is not empty.
var OwnedArgs, OwnedArgsWithAdapters = engine.For(engine.VLLM).RefusedArgs()

// OwnedEnv are the environment variable names refused in spec.env; OwnedEnvWithAdapters only
// while spec.adapters is not empty.
var OwnedEnv, OwnedEnvWithAdapters = engine.For(engine.VLLM).RefusedEnv()
