// The vLLM flags and variables spec.engineArgs and spec.env may not carry, as one table that
// both the CRD's CEL rules (crd/definition_v1beta1.go) and the pure Validate (crd/decode.go)
// read through engine.Engine's RefusedArgs and RefusedEnv.

package vllm

import (
	"strings"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// ownedArg is the OwnedArg of flags with its Pattern.
func ownedArg(message string, flags ...string) engine.OwnedArg {
	return engine.OwnedArg{Flags: flags, Pattern: flagPattern(flags), Message: message}
}

// refusedArgs are refused in spec.engineArgs, each group by its own CEL rule. Every flag is
// one of vLLM v0.11's option strings (engine/arg_utils.py, entrypoints/openai/cli_args.py).
var refusedArgs = []engine.OwnedArg{
	// The operator passes the model as vllm serve's positional model_tag (cli_args.py).
	ownedArg("spec.engineArgs: the model is spec.baseModel; the operator passes it to vllm serve", "--model"),
	// The operator passes --port 8000; the Service, the probes and the adapter loader dial it.
	ownedArg("spec.engineArgs: --port and --host are the operator's (port 8000 on every address: the Service, the probes and the gateway use it)", "--port", "--host"),
	// The operator passes it from spec.gpusPerReplica or spec.parallelism (reconcile/template.go,
	// lws.go); -tp is its alias.
	ownedArg("spec.engineArgs: --tensor-parallel-size is spec.gpusPerReplica (or spec.parallelism.tensorParallelSize, spec.multiNode.tensorParallelSize); the operator passes it", "--tensor-parallel-size", "-tp"),
	// The operator passes it for spec.parallelism and spec.multiNode; -pp is its alias.
	ownedArg("spec.engineArgs: --pipeline-parallel-size is spec.multiNode.pipelineParallelSize or spec.parallelism.pipelineParallelSize (on one node too); the operator passes it", "--pipeline-parallel-size", "-pp"),
	// status.modelName reports the name the operator passes.
	ownedArg("spec.engineArgs: --served-model-name is the operator's: clients send spec.baseModel, reported in status.modelName", "--served-model-name"),
	// --enable-lora is a BooleanOptionalAction (arg_utils.py): --no-enable-lora would undo the operator's.
	ownedArg("spec.engineArgs: --enable-lora, --lora-modules and --max-cpu-loras are the operator's; list adapters in spec.adapters",
		"--enable-lora", "--no-enable-lora", "--lora-modules", "--max-cpu-loras"),
	// Without log_stats v1's AsyncLLM makes no StatLoggerManager (v1/engine/async_llm.py): no vllm:num_requests_waiting.
	ownedArg("spec.engineArgs: --disable-log-stats is refused: it turns off vLLM's stat loggers, which the autoscaler and the operator's metrics read (vllm:num_requests_waiting on /metrics)", "--disable-log-stats"),
	// A pod (or multi-node group) is one model copy: the HPA, the PDB and the GPU counts count pods.
	ownedArg("spec.engineArgs: --data-parallel-size (-dp) is refused: model copies are spec.replicas (or spec.autoscaling), one pod or spec.multiNode group each, which the operator scales", "--data-parallel-size", "-dp"),
	// The operator passes ray to a multi-node leader (reconcile/lws.go); one pod has no Ray cluster.
	ownedArg("spec.engineArgs: --distributed-executor-backend is the operator's: vLLM's default (mp) in one pod, ray across the pods of spec.multiNode", "--distributed-executor-backend"),
}

// apiKeyReason says why an API key is refused on a model with adapters: vLLM's
// AuthenticationMiddleware (entrypoints/openai/api_server.py) wants a bearer token on every
// path under /v1 and exempts the rest, so the probes (/health) and the metrics (/metrics) still
// work, but the operator's adapter calls carry no token.
const apiKeyReason = "cannot be used with spec.adapters: vLLM then requires a bearer token on every /v1 path, and the operator loads adapters through /v1/load_lora_adapter and reads /v1/models without one (/health and /metrics stay open, so a model without adapters may set it)"

// refusedArgsWithAdapters are refused in spec.engineArgs only while spec.adapters is not empty.
var refusedArgsWithAdapters = []engine.OwnedArg{
	ownedArg("spec.engineArgs: --api-key "+apiKeyReason, "--api-key"),
}

// refusedEnv are the environment variable names refused in spec.env.
var refusedEnv = []engine.OwnedName{
	{Name: "VLLM_PORT", Message: "spec.env: VLLM_PORT is vLLM's internal port and must not be set (a Service link value such as tcp://... aborts vLLM); the API port is 8000"},
	{Name: "VLLM_ALLOW_RUNTIME_LORA_UPDATING", Message: "spec.env: VLLM_ALLOW_RUNTIME_LORA_UPDATING is set by the operator for spec.adapters"},
}

// refusedEnvWithAdapters are refused in spec.env only while spec.adapters is not empty.
var refusedEnvWithAdapters = []engine.OwnedName{
	// api_server.py takes VLLM_API_KEY when --api-key is not given.
	{Name: "VLLM_API_KEY", Message: "spec.env: VLLM_API_KEY " + apiKeyReason},
}

// flagPattern is a regular expression, for CEL's matches and Go's regexp alike (both RE2),
// matching one list item that vLLM v0.11 reads as one of flags. vLLM's FlexibleArgumentParser
// (vllm/utils/__init__.py) rewrites '_' to '-' in a --flag up to its first '.', and reads
// --flag.key value as --flag with a JSON value; argparse then takes an exact option, or any
// unique prefix of one (allow_abbrev, which vLLM leaves True), with =value or without, and a
// prefix of a single-dash option too (-t for -tp). So an item is refused when its flag part,
// before the first '=' or '.', is a non-empty prefix of a refused flag: no other v0.11 option
// is such a prefix, and a prefix that several options share is one argparse refuses anyway.
func flagPattern(flags []string) string {
	var long, short []string
	for _, f := range flags {
		if name, ok := strings.CutPrefix(f, "--"); ok {
			long = append(long, prefixes(name, "[-_]"))
		} else {
			short = append(short, prefixes(strings.TrimPrefix(f, "-"), "-"))
		}
	}
	var alts []string
	if len(long) > 0 {
		alts = append(alts, "--("+strings.Join(long, "|")+")")
	}
	if len(short) > 0 {
		alts = append(alts, "-("+strings.Join(short, "|")+")")
	}
	if len(alts) == 1 {
		return "^" + alts[0] + "([=.]|$)"
	}
	return "^(" + strings.Join(alts, "|") + ")([=.]|$)"
}

// prefixes matches the non-empty prefixes of name, a flag of letters, digits and '-' (nothing
// to escape in a regular expression or a CEL string), each '-' as dash: "ab-c" is
// a(b([-_](c)?)?)? for dash [-_].
func prefixes(name, dash string) string {
	var b strings.Builder
	for i, c := range name {
		if i > 0 {
			b.WriteByte('(')
		}
		if c == '-' {
			b.WriteString(dash)
		} else {
			b.WriteRune(c)
		}
	}
	b.WriteString(strings.Repeat(")?", len(name)-1))
	return b.String()
}
