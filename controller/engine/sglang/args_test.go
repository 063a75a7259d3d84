package sglang

import (
	"regexp"
	"testing"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// refusedBy is the message of the first rule of table that refuses item; "" when none does.
func refusedBy(table []engine.OwnedArg, item string) string {
	for _, o := range table {
		if regexp.MustCompile(o.Pattern).MatchString(item) {
			return o.Message
		}
	}
	return ""
}

// TestRefusedArgs: the operator's flags are refused in every spelling argparse accepts (exact,
// aliased, abbreviated, with =value), and real SGLang flags that look alike are not.
func TestRefusedArgs(t *testing.T) {
	always, withAdapters := SGLang{}.RefusedArgs()
	for _, item := range []string{
		"--model-path", "--model-path=/models/x", "--model", "--model=Qwen/Qwen3-8B",
		"--port", "--port=9000", "--host", "--host=::",
		"--tp-size", "--tp", "--tp=2", "--tensor-parallel-size=4", "--tensor-parallel",
		"--pp-size", "--pipeline-parallel-size", "--pp",
		"--dp-size", "--dp", "--data-parallel-size=2",
		"--served-model-name", "--served-model-name=x", "--served",
		"--nnodes", "--node-rank=1", "--dist-init-addr", "--nccl-init-addr=1.2.3.4:5000",
		// SGLang's own tests spell --lora-paths as its abbreviation --lora-path.
		"--enable-lora", "--lora-paths", "--lora-path", "--max-loras-per-batch=4", "--max-loaded-loras",
	} {
		if refusedBy(always, item) == "" {
			t.Errorf("%q is not refused", item)
		}
	}
	for _, item := range []string{
		"--tokenizer-path", "--model-impl", "--model-loader-extra-config={}", "--revision",
		"--enable-metrics", "--enable-metrics-for-all-schedulers", "--api-key",
		"--max-lora-rank", "--lora-target-modules", "--lora-backend=triton", "--lora-pages", "--max-lora-chunk-size",
		"--dist-timeout", "--mem-fraction-static=0.8", "--tool-call-parser", "--trust-remote-code",
		"--enable-dp-attention", "--ep-size", "--port-x", "-tp", "2", "/models/x",
	} {
		if msg := refusedBy(always, item); msg != "" {
			t.Errorf("%q is refused: %s", item, msg)
		}
	}
	for _, item := range []string{"--api-key", "--api-key=secret", "--api"} {
		if refusedBy(withAdapters, item) == "" {
			t.Errorf("%q is not refused with adapters", item)
		}
	}
	if msg := refusedBy(always, "--tp=2"); msg == "" || !regexp.MustCompile(`spec\.gpusPerReplica`).MatchString(msg) {
		t.Errorf("--tp's message %q names no spec field", msg)
	}
	for _, o := range append(always, withAdapters...) {
		if _, err := regexp.Compile(o.Pattern); err != nil || len(o.Flags) == 0 || o.Message == "" {
			t.Errorf("rule %v: %v", o.Flags, err)
		}
	}
}
