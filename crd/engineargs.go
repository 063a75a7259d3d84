// The engines spec.engine may name, and the flags and variables spec.engineArgs and spec.env may
// not carry under each: the engine's own table (engine.Engine's RefusedArgs and RefusedEnv),
// which both the CRD's CEL rules (rules_v1beta1.go) and the pure Validate (decode.go) read, the
// rules choosing the table by spec.engine. The engines the API knows are registered by
// importing their packages here.

package crd

import (
	"regexp"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/controller/engine/sglang"
	"github.com/example/inferenceservice-operator/controller/engine/vllm"
)

// OwnedArg is a group of flags refused in spec.engineArgs; OwnedName a variable refused in
// spec.env.
type (
	OwnedArg  = engine.OwnedArg
	OwnedName = engine.OwnedName
)

// The values of spec.engine; EngineVLLM is the default, and the engine of every model created
// before the field.
const (
	EngineVLLM   = engine.VLLM
	EngineSGLang = sglang.Name
)

// Engines are spec.engine's values, the default first.
var Engines = []string{EngineVLLM, EngineSGLang}

// DefaultImage is the vLLM image: spec.image's schema default before spec.engine, so every model
// created before it carries this image in its spec.
const DefaultImage = vllm.Image

// OwnedArgs are vLLM's flags refused in spec.engineArgs, each group by its own CEL rule;
// OwnedArgsWithAdapters only while spec.adapters is not empty. Refused(name) has every engine's.
var OwnedArgs, OwnedArgsWithAdapters = engine.For(engine.VLLM).RefusedArgs()

// OwnedEnv are vLLM's variables refused in spec.env; OwnedEnvWithAdapters only while
// spec.adapters is not empty.
var OwnedEnv, OwnedEnvWithAdapters = engine.For(engine.VLLM).RefusedEnv()

// Refusals are one engine's tables, with the flag patterns compiled for Validate.
type Refusals struct {
	Engine                 string
	Args, ArgsWithAdapters []OwnedArg
	Env, EnvWithAdapters   []OwnedName
	args, argsWithAdapters []*regexp.Regexp
}

// refusals are every engine's tables, built once (the patterns compiled once).
var refusals = func() map[string]*Refusals {
	out := map[string]*Refusals{}
	for _, name := range Engines {
		e := engine.For(name)
		r := &Refusals{Engine: name}
		r.Args, r.ArgsWithAdapters = e.RefusedArgs()
		r.Env, r.EnvWithAdapters = e.RefusedEnv()
		r.args, r.argsWithAdapters = compileOwned(r.Args), compileOwned(r.ArgsWithAdapters)
		out[name] = r
	}
	return out
}()

// Refused is the tables of the engine spec.engine names ("" is vLLM); nil for an engine the
// API does not know.
func Refused(name string) *Refusals {
	if name == "" {
		name = EngineVLLM
	}
	return refusals[name]
}

func compileOwned(owned []OwnedArg) []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(owned))
	for i, a := range owned {
		out[i] = regexp.MustCompile(a.Pattern)
	}
	return out
}
