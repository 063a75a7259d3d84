package vllm

import (
	"regexp"
	"strings"
	"testing"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/controller/engine/vllm/vllmtest"
)

// logPydantic is vLLM v0.11 refusing the split in VllmConfig's validator: pydantic wraps it.
const logPydantic = `(APIServer pid=1) Traceback (most recent call last):
(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", line 1431, in create_engine_config
(APIServer pid=1)     config = VllmConfig(
(APIServer pid=1)              ^^^^^^^^^^^
(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/pydantic/_internal/_dataclasses.py", line 123, in __init__
(APIServer pid=1)     s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)
(APIServer pid=1) pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig
(APIServer pid=1)   Value error, Total number of attention heads (32) must be divisible by tensor parallel size (3). [type=value_error, input_value=ArgsKwargs((), {'model_co...additional_config': {}}), input_type=ArgsKwargs]
(APIServer pid=1)     For further information visit https://errors.pydantic.dev/2.11/v/value_error
`

// colour prefixes each "(Name pid=N) " tag of log with vLLM's CYAN and RESET codes.
func colour(log string) string {
	return regexp.MustCompile(`(?m)^(\([A-Za-z0-9_]+ pid=\d+\))`).ReplaceAllString(log, "\x1b[1;36m$1\x1b[0;0m")
}

// TestDecisiveLine: the line of a crashed model server's log that says why it died.
func TestDecisiveLine(t *testing.T) {
	for _, c := range []struct{ name, log, want string }{
		{"unknown argument: argparse's error, not its usage", vllmtest.LogBadArgument, "vllm serve: error: unrecognized arguments: --foo"},
		{"CUDA out of memory: the root cause, not the error pointing at it", vllmtest.LogGPUOOM, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.50 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.21 MiB is free."},
		{"missing weights path: the exception, not its hints", vllmtest.LogMissingWeights, "ValueError: Invalid repository ID or local directory specified: '/models/llama'."},
		{"no config.json, after a caret line", vllmtest.LogNoConfigJSON, "OSError: /models/llama does not appear to have a file named config.json."},
		{"engine died: the CUDA error the later traceback points to", vllmtest.LogEngineDead, "RuntimeError: CUDA error: an illegal memory access was encountered"},
		{"a tail cut inside the traceback", vllmtest.LogCutTraceback, "ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group."},
		{"killed by the kernel: where it was", vllmtest.LogOOMKilled, "Loading safetensors checkpoint shards:  33% Completed | 1/3 [00:01<00:02,  1.10s/it]"},
		{"no traceback: the last line", vllmtest.LogBindFailed, "ERROR:    [Errno 98] error while attempting to bind on address ('127.16.0.5', 8000): address already in use"},
		{"chained exceptions: the last raised", vllmtest.LogChained, "ImportError: vllm is not built for this CUDA version"},
		{"a config check: the error pydantic wraps, not pydantic's count", logPydantic, "ValueError: Total number of attention heads (32) must be divisible by tensor parallel size (3)."},
		// vLLM v0.11 colours every process prefix, on a terminal or not (vllm/utils _add_prefix:
		// CYAN, then RESET): the traceback's indentation comes after the codes.
		{"coloured process prefixes, as vLLM writes them", colour(vllmtest.LogGPUOOM), "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.50 GiB."},
		{"empty", "", ""},
		{"blank lines only", "\n\n  \n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := DecisiveLine(c.log)
			if !strings.HasPrefix(got, c.want) || c.want == "" && got != "" {
				t.Fatalf("got  %q\nwant %q", got, c.want)
			}
			if len(got) > engine.MaxLastWords {
				t.Fatalf("%d bytes, more than %d", len(got), engine.MaxLastWords)
			}
		})
	}
}

func TestDecisiveLineIsBounded(t *testing.T) {
	got := DecisiveLine("ValueError: " + strings.Repeat("é", 300) + "\n")
	if len(got) > engine.MaxLastWords || !strings.HasSuffix(got, "...") || !strings.HasPrefix(got, "ValueError: é") {
		t.Fatalf("%d bytes: %q", len(got), got)
	}
	if !strings.HasSuffix(strings.TrimSuffix(got, "..."), "é") {
		t.Fatalf("cut inside a character: %q", got)
	}
}
