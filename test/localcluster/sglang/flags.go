// launch_server's options as SGLang v0.5.3's ServerArgs.add_cli_args registers them
// (python/sglang/srt/server_args.py): a plain argparse.ArgumentParser() in prepare_server_args,
// so allow_abbrev is on ("--tp 2" is --tp-size 2) and an abbreviation several options share is
// refused. The order is the registration order, group by group as add_cli_args adds them,
// which is the order argparse lists an ambiguous abbreviation's candidates in and the usage
// line's. The table holds the options of the groups a serving deployment uses (model and
// tokenizer, HTTP, quantization, memory and scheduling, runtime, logging, API, data
// parallelism, multi-node, LoRA, kernel backends, speculative decoding, expert parallelism,
// optimization); the debug, disaggregation and hardware-specific groups are left out, so an
// abbreviation only they would make ambiguous is taken here.

package sglang

import (
	"strconv"

	"github.com/example/inferenceservice-operator/test/localcluster/argparse"
	"github.com/example/inferenceservice-operator/test/localcluster/pyrepr"
)

// Choices as server_args.py lists them.
var (
	loadFormatChoices = []string{"auto", "pt", "safetensors", "npcache", "dummy", "sharded_state", "gguf",
		"bitsandbytes", "layered", "remote", "remote_instance"}
	dtypeChoices        = []string{"auto", "half", "float16", "bfloat16", "float", "float32"}
	kvCacheDtypeChoices = []string{"auto", "fp8_e5m2", "fp8_e4m3"}
	quantizationChoices = []string{"awq", "fp8", "gptq", "marlin", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf",
		"modelopt", "modelopt_fp4", "petit_nvfp4", "w8a8_int8", "w8a8_fp8", "moe_wna16", "qoq", "w4afp8", "mxfp4"}
	schedulePolicyChoices = []string{"lpm", "random", "fcfs", "dfs-weight", "lof", "priority"}
	loadBalanceChoices    = []string{"round_robin", "shortest_queue", "minimum_tokens"}
	// loraTargetChoices are SUPPORTED_LORA_TARGET_MODULES and "all".
	loraTargetChoices = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
		"qkv_proj", "gate_up_proj", "all"}
	attentionBackendChoices = []string{"triton", "torch_native", "flex_attention", "cutlass_mla", "fa3", "fa4", "flashinfer",
		"flashmla", "trtllm_mla", "trtllm_mha", "dual_chunk_flash_attn", "aiter", "wave", "intel_amx", "ascend"}
	samplingBackendChoices  = []string{"flashinfer", "pytorch"}
	grammarBackendChoices   = []string{"xgrammar", "outlines", "llguidance", "none"}
	speculativeChoices      = []string{"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"}
	reasoningParserChoices  = []string{"deepseek-r1", "deepseek-v3", "glm45", "gpt-oss", "kimi", "qwen3", "qwen3-thinking", "step3"}
	toolCallParserChoices   = []string{"deepseekv3", "deepseekv31", "glm", "glm45", "gpt-oss", "kimi_k2", "llama3", "mistral", "pythonic", "qwen", "qwen25", "qwen3_coder", "step3"}
	moeRunnerBackendChoices = []string{"auto", "triton", "triton_kernel", "flashinfer_trtllm", "flashinfer_cutlass", "flashinfer_mxfp4"}
	moeA2ABackendChoices    = []string{"none", "deepep"}
	logRequestsLevels       = []string{"0", "1", "2", "3"}
)

// opt builds an option; dest is argparse's: the first long option string, '-' as '_'.
func opt(action argparse.Action, typ argparse.Type, flags ...string) argparse.Option {
	dest := ""
	for _, f := range flags {
		if len(f) > 2 && f[:2] == "--" {
			dest = f[2:]
			break
		}
	}
	b := []byte(dest)
	for i := range b {
		if b[i] == '-' {
			b[i] = '_'
		}
	}
	return argparse.Option{Flags: flags, Dest: string(b), Action: action, Type: typ}
}

func str(flags ...string) argparse.Option  { return opt(argparse.Store, argparse.Str, flags...) }
func num(flags ...string) argparse.Option  { return opt(argparse.Store, argparse.Int, flags...) }
func flt(flags ...string) argparse.Option  { return opt(argparse.Store, argparse.Float, flags...) }
func flag(flags ...string) argparse.Option { return opt(argparse.StoreTrue, argparse.Str, flags...) }

func choice(o argparse.Option, choices []string) argparse.Option {
	o.Choices = choices
	return o
}

func nargs(o argparse.Option, n byte) argparse.Option {
	o.Nargs = n
	return o
}

// serverOptions are launch_server's options.
func serverOptions() []argparse.Option {
	model := str("--model-path", "--model")
	model.Required = true
	return []argparse.Option{
		// Model and tokenizer
		model,
		str("--tokenizer-path"),
		choice(str("--tokenizer-mode"), []string{"auto", "slow"}),
		num("--tokenizer-worker-num"),
		flag("--skip-tokenizer-init"),
		choice(str("--load-format"), loadFormatChoices),
		str("--model-loader-extra-config"),
		flag("--trust-remote-code"),
		num("--context-length"),
		flag("--is-embedding"),
		flag("--enable-multimodal"),
		str("--revision"),
		str("--model-impl"),
		// HTTP server
		str("--host"),
		num("--port"),
		flag("--skip-server-warmup"),
		str("--warmups"),
		num("--nccl-port"),
		// Quantization and data type
		choice(str("--dtype"), dtypeChoices),
		choice(str("--quantization"), quantizationChoices),
		str("--quantization-param-path"),
		choice(str("--kv-cache-dtype"), kvCacheDtypeChoices),
		// Memory and scheduling
		flt("--mem-fraction-static"),
		num("--max-running-requests"),
		num("--max-queued-requests"),
		num("--max-total-tokens"),
		num("--chunked-prefill-size"),
		num("--max-prefill-tokens"),
		choice(str("--schedule-policy"), schedulePolicyChoices),
		flag("--enable-priority-scheduling"),
		flag("--schedule-low-priority-values-first"),
		num("--priority-scheduling-preemption-threshold"),
		flt("--schedule-conservativeness"),
		num("--page-size"),
		flt("--hybrid-kvcache-ratio"),
		flt("--swa-full-tokens-ratio"),
		flag("--disable-hybrid-swa-memory"),
		// Runtime options
		str("--device"),
		num("--tensor-parallel-size", "--tp-size"),
		num("--pipeline-parallel-size", "--pp-size"),
		num("--pp-max-micro-batch-size"),
		num("--stream-interval"),
		flag("--stream-output"),
		num("--random-seed"),
		str("--constrained-json-whitespace-pattern"),
		flt("--watchdog-timeout"),
		num("--dist-timeout"),
		str("--download-dir"),
		num("--base-gpu-id"),
		num("--gpu-id-step"),
		flag("--sleep-on-idle"),
		// Logging
		str("--log-level"),
		str("--log-level-http"),
		flag("--log-requests"),
		choice(num("--log-requests-level"), logRequestsLevels),
		str("--crash-dump-folder"),
		flag("--show-time-cost"),
		flag("--enable-metrics"),
		flag("--enable-metrics-for-all-schedulers"),
		str("--tokenizer-metrics-custom-labels-header"),
		nargs(str("--tokenizer-metrics-allowed-customer-labels"), '+'),
		nargs(flt("--bucket-time-to-first-token"), '+'),
		nargs(flt("--bucket-inter-token-latency"), '+'),
		nargs(flt("--bucket-e2e-request-latency"), '+'),
		flag("--collect-tokens-histogram"),
		flt("--gc-warning-threshold-secs"),
		num("--decode-log-interval"),
		flag("--enable-request-time-stats-logging"),
		str("--kv-events-config"),
		flag("--enable-trace"),
		str("--oltp-traces-endpoint"),
		// API related
		str("--api-key"),
		str("--served-model-name"),
		str("--weight-version"),
		str("--chat-template"),
		str("--completion-template"),
		str("--file-storage-path"),
		flag("--enable-cache-report"),
		choice(str("--reasoning-parser"), reasoningParserChoices),
		choice(str("--tool-call-parser"), toolCallParserChoices),
		str("--tool-server"),
		// Data parallelism
		num("--data-parallel-size", "--dp-size"),
		choice(str("--load-balance-method"), loadBalanceChoices),
		// Multi-node distributed serving
		str("--dist-init-addr", "--nccl-init-addr"),
		num("--nnodes"),
		num("--node-rank"),
		// Model override args
		str("--json-model-override-args"),
		str("--preferred-sampling-params"),
		// LoRA
		flag("--enable-lora"),
		num("--max-lora-rank"),
		choice(nargs(str("--lora-target-modules"), '*'), loraTargetChoices),
		nargs(str("--lora-paths"), '*'),
		num("--max-loras-per-batch"),
		num("--max-loaded-loras"),
		str("--lora-backend"),
		// Kernel backend
		choice(str("--attention-backend"), attentionBackendChoices),
		choice(str("--prefill-attention-backend"), attentionBackendChoices),
		choice(str("--decode-attention-backend"), attentionBackendChoices),
		choice(str("--sampling-backend"), samplingBackendChoices),
		choice(str("--grammar-backend"), grammarBackendChoices),
		str("--mm-attention-backend"),
		// Speculative decoding
		choice(str("--speculative-algorithm"), speculativeChoices),
		str("--speculative-draft-model-path", "--speculative-draft-model"),
		num("--speculative-num-steps"),
		num("--speculative-eagle-topk"),
		num("--speculative-num-draft-tokens"),
		// Expert parallelism
		num("--expert-parallel-size", "--ep-size", "--ep"),
		choice(str("--moe-a2a-backend"), moeA2ABackendChoices),
		choice(str("--moe-runner-backend"), moeRunnerBackendChoices),
		flag("--enable-eplb"),
		// Hierarchical cache
		flag("--enable-hierarchical-cache"),
		flt("--hicache-ratio"),
		num("--hicache-size"),
		// Optimization and debug options
		flag("--disable-radix-cache"),
		num("--cuda-graph-max-bs"),
		nargs(num("--cuda-graph-bs"), '+'),
		flag("--disable-cuda-graph"),
		flag("--disable-cuda-graph-padding"),
		flag("--enable-profile-cuda-graph"),
		flag("--enable-cudagraph-gc"),
		flag("--enable-nccl-nvls"),
		flag("--enable-symm-mem"),
		flag("--enable-tokenizer-batch-encode"),
		flag("--disable-outlines-disk-cache"),
		flag("--disable-custom-all-reduce"),
		flag("--enable-mscclpp"),
		flag("--disable-overlap-schedule"),
		flag("--enable-mixed-chunk"),
		flag("--enable-dp-attention"),
		flag("--enable-dp-lm-head"),
		flag("--enable-two-batch-overlap"),
		flag("--enable-torch-compile"),
		num("--torch-compile-max-bs"),
		str("--torchao-config"),
		flag("--enable-nan-detection"),
		flag("--enable-p2p-check"),
		flag("--triton-attention-reduce-in-fp32"),
		num("--triton-attention-num-kv-splits"),
		num("--num-continuous-decode-steps"),
		flag("--delete-ckpt-after-loading"),
		flag("--enable-memory-saver"),
		flag("--allow-auto-truncate"),
		flag("--enable-custom-logit-processor"),
		flag("--disable-shared-experts-fusion"),
		flag("--disable-chunked-prefix-cache"),
		flag("--enable-return-hidden-states"),
		flag("--enable-deterministic-inference"),
	}
}

// pyRepr is the repr ServerArgs' dataclass prints a value with.
func pyRepr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int:
		return strconv.Itoa(x)
	case float64:
		return pyrepr.Float(x)
	case string:
		return pyrepr.Str(x)
	case []any:
		s := "["
		for i, e := range x {
			if i > 0 {
				s += ", "
			}
			s += pyRepr(e)
		}
		return s + "]"
	}
	return "None"
}
