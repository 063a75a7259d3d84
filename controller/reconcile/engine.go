// The model server a model runs on: the decision reads every word of its engine (flags, command
// line, metric names, log readers) through engine.Engine, never spelling vLLM's itself.

package reconcile

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
)

// defaultEngine serves every model whose spec names no engine (spec.engine's default).
var defaultEngine = engine.For(engine.VLLM)

// engineOf is the engine isvc is served by: spec.engine, read from its annotation. An engine
// no package registers (which Validate refuses before any reconcile) reads as the default.
func engineOf(isvc *crd.InferenceService) engine.Engine { return engineNamed(crd.EngineOf(isvc)) }

// engineNamed is the engine registered as name, the default for "" or an unknown name.
func engineNamed(name string) engine.Engine {
	if e := engine.For(name); e != nil {
		return e
	}
	return defaultEngine
}

// server is the default engine's container parts.
var server = defaultEngine.Server()

// serverParts are one engine's parts of the model server container, built once and shared by
// every model on it: desired objects are only read, and TestSharedPartsUnchanged checks that
// nothing writes through them.
type serverParts struct {
	server engine.Server
	health *corev1.HTTPGetAction
	// readiness takes a slow answer as a busy pod for a few seconds (traffic moves to other
	// pods); liveness is far looser, restarting only a server that has not answered for
	// minutes, so a busy healthy server is never killed: vLLM answers /health on its event
	// loop, behind the requests it serves, and SGLang's /health waits on its tokenizer
	// manager's loop likewise.
	readiness, liveness *corev1.Probe
	ports               []corev1.ContainerPort
	// runtimeAdapters is set when the model has adapters, for an engine that needs a switch
	// to load them through its API; nil for one that needs none.
	runtimeAdapters *corev1.EnvVar
}

func newServerParts(s engine.Server) *serverParts {
	health := &corev1.HTTPGetAction{Path: s.HealthPath, Port: intstr.FromString(s.PortName)}
	p := &serverParts{
		server:    s,
		health:    health,
		readiness: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: health}, PeriodSeconds: 5, TimeoutSeconds: 5, FailureThreshold: 3},
		liveness:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: health}, PeriodSeconds: 30, TimeoutSeconds: 30, FailureThreshold: 10},
		ports:     []corev1.ContainerPort{{Name: s.PortName, ContainerPort: s.Port, Protocol: corev1.ProtocolTCP}},
	}
	if s.RuntimeAdaptersEnv != "" {
		p.runtimeAdapters = &corev1.EnvVar{Name: s.RuntimeAdaptersEnv, Value: "True"}
	}
	return p
}

// enginesParts are every registered engine's parts, by name.
var enginesParts = func() map[string]*serverParts {
	out := map[string]*serverParts{}
	for _, name := range engine.Names() {
		out[name] = newServerParts(engine.For(name).Server())
	}
	return out
}()

// partsOf is the container parts of the engine named (spec.engine; "" is the default).
func partsOf(name string) *serverParts {
	if p, ok := enginesParts[name]; ok {
		return p
	}
	return enginesParts[defaultEngine.Name()]
}
