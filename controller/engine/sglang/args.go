// The SGLang flags and variables spec.engineArgs and spec.env may not carry, read by the CRD's
// CEL rules and the pure Validate through engine.Engine's RefusedArgs and RefusedEnv, as vLLM's.

package sglang

import (
	"strings"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// ownedArg is the OwnedArg of flags with its Pattern.
func ownedArg(message string, flags ...string) engine.OwnedArg {
	return engine.OwnedArg{Flags: flags, Pattern: flagPattern(flags), Message: message}
}

// refusedArgs are refused in spec.engineArgs, each group by its own CEL rule. Every flag is one
// of the option strings of ServerArgs.add_cli_args (python/sglang/srt/server_args.py, v0.5.3),
// with its aliases as add_argument declares them ("--dist-init-addr", "--nccl-init-addr" in its
// "Multi-node distributed serving" group, and so on).
var refusedArgs = []engine.OwnedArg{
	// add_cli_args: "--model-path", "--model" (dest model_path); ServeArgs passes --model-path.
	ownedArg("spec.engineArgs: the model is spec.baseModel; the operator passes it to sglang.launch_server as --model-path", "--model-path", "--model"),
	// add_cli_args: "--host" (default 127.0.0.1) and "--port" (default 30000); the operator passes
	// --host 0.0.0.0 --port 8000.
	ownedArg("spec.engineArgs: --port and --host are the operator's (port 8000 on every address: the Service, the probes and the gateway use it)", "--port", "--host"),
	// add_cli_args: "--tensor-parallel-size", "--tp-size"; the docs' "--tp 2" is argparse's
	// abbreviation of --tp-size, refused by the pattern's prefixes.
	ownedArg("spec.engineArgs: --tp-size (--tensor-parallel-size, --tp) is spec.gpusPerReplica (or spec.parallelism.tensorParallelSize, spec.multiNode.tensorParallelSize); the operator passes it", "--tensor-parallel-size", "--tp-size"),
	// add_cli_args: "--pipeline-parallel-size", "--pp-size".
	ownedArg("spec.engineArgs: --pp-size (--pipeline-parallel-size) is spec.multiNode.pipelineParallelSize or spec.parallelism.pipelineParallelSize; the operator passes it", "--pipeline-parallel-size", "--pp-size"),
	// add_cli_args: "--served-model-name"; its value labels every series (model_name).
	ownedArg("spec.engineArgs: --served-model-name is the operator's: clients send spec.baseModel, reported in status.modelName", "--served-model-name"),
	// add_cli_args: "--data-parallel-size", "--dp-size".
	ownedArg("spec.engineArgs: --dp-size (--data-parallel-size) is refused: model copies are spec.replicas (or spec.autoscaling), one pod or spec.multiNode group each, which the operator scales", "--data-parallel-size", "--dp-size"),
	// add_cli_args: "--nnodes", "--node-rank", "--dist-init-addr" (alias "--nccl-init-addr").
	ownedArg("spec.engineArgs: --nnodes, --node-rank and --dist-init-addr are the operator's: it passes them to the pods of spec.multiNode", "--nnodes", "--node-rank", "--dist-init-addr", "--nccl-init-addr"),
	// add_cli_args' LoRA group: "--enable-lora" (store_true), "--lora-paths", "--max-loras-per-batch",
	// "--max-loaded-loras"; the operator passes all but --lora-paths for spec.adapters.
	ownedArg("spec.engineArgs: --enable-lora, --lora-paths, --max-loras-per-batch and --max-loaded-loras are the operator's; list adapters in spec.adapters",
		"--enable-lora", "--lora-paths", "--max-loras-per-batch", "--max-loaded-loras"),
}

// apiKeyReason says why an API key is refused on a model with adapters: add_api_key_middleware
// (python/sglang/srt/utils) wants "Bearer <key>" on every request but OPTIONS and the paths
// starting /health or /metrics, so
// the probes and the scrape still work, but the operator's /load_lora_adapter calls carry none.
const apiKeyReason = "cannot be used with spec.adapters: SGLang then requires a bearer token on every path but /health and /metrics, and the operator loads adapters through /load_lora_adapter without one (a model without adapters may set it)"

// refusedArgsWithAdapters are refused in spec.engineArgs only while spec.adapters is not empty.
var refusedArgsWithAdapters = []engine.OwnedArg{
	ownedArg("spec.engineArgs: --api-key "+apiKeyReason, "--api-key"),
}

// flagPattern matches one list item that SGLang reads as one of flags. prepare_server_args
// (server_args.py) parses with a plain argparse.ArgumentParser: no '_' to '-' rewrite (unlike
// vLLM's FlexibleArgumentParser) and allow_abbrev left True, so an exact option or any unique
// prefix of one, with =value or without, selects it ("--tp 2" is --tp-size 2). An item is
// refused when its flag part, before the first '=', is a prefix of a refused flag at least as
// long as "--" and one letter; a prefix several options share argparse refuses anyway.
func flagPattern(flags []string) string {
	alts := make([]string, 0, len(flags))
	for _, f := range flags {
		alts = append(alts, prefixes(strings.TrimPrefix(f, "--")))
	}
	return "^--(" + strings.Join(alts, "|") + ")(=|$)"
}

// prefixes matches the non-empty prefixes of name, a flag of letters, digits and '-'.
func prefixes(name string) string {
	var b strings.Builder
	for i, c := range name {
		if i > 0 {
			b.WriteByte('(')
		}
		b.WriteRune(c)
	}
	b.WriteString(strings.Repeat(")?", len(name)-1))
	return b.String()
}
