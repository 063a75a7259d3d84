// vllm serve's options as vLLM v0.11.0's parser registers them. Read from vLLM's source
// (vllm/entrypoints/openai/cli_args.py: make_arg_parser and FrontendArgs;
// vllm/engine/arg_utils.py: EngineArgs.add_cli_args, AsyncEngineArgs.add_cli_args and the
// types get_kwargs derives from the config dataclasses in vllm/config/;
// vllm/entrypoints/cli/serve.py; vllm/utils/__init__.py: FlexibleArgumentParser) at main
// 2518230d3 (2025-10-01). The options differ from the September 27 state only by
// --kv-cache-dtype bfloat16 (DeepSeek-V3.2, #25896), which v0.11.0 ships; the last change
// before v0.11.0 that added options was #25794 (--trust-request-chat-template). The order is
// argparse's registration order: an ambiguous abbreviation lists its candidates in it, and
// vLLM's "non-default args" line follows it.

package vllm

// optAction is what argparse does with an option it matched.
type optAction uint8

const (
	actStore     optAction = iota // store the converted value (a list, for nargs '+')
	actStoreTrue                  // store_true: takes no value
	actBoolOpt                    // BooleanOptionalAction: --x stores True, --no-x False; no value
	actAppend                     // append: each occurrence adds its value
	actLoRA                       // vLLM's LoRAParserAction: each value name=path or JSON
	actHelp                       // -h/--help: argparse prints the help and exits 0
)

// valueType is the type= callable argparse converts a value with; the names follow vLLM's.
type valueType uint8

const (
	vRaw          valueType = iota // no type: the string as given
	vStr                           // str
	vOptStr                        // optional_type(str): "" and "None" are None
	vInt                           // int
	vOptInt                        // optional_type(int)
	vFloat                         // float
	vOptFloat                      // optional_type(float)
	vBool                          // bool: every non-empty string is True
	vHumanInt                      // human_readable_int: 4096, 32k, 1M
	vOptHumanInt                   // optional_type(human_readable_int)
	vLoads                         // json.loads itself
	vJSONDict                      // parse_type(json.loads)
	vOptJSONDict                   // optional_type(parse_type(json.loads))
	vOptJSON                       // optional_type(json.loads)
	vDictOrStr                     // union_dict_and_str: JSON when it looks like {...}, else the string
	vDataclass                     // parse_dataclass: pydantic validates the JSON as a config class
	vOptDataclass                  // optional_type(parse_dataclass)
)

// serveOption is one option of vllm serve's parser.
type serveOption struct {
	flags   []string // option strings in registration order; a BooleanOptionalAction's --no-x second
	dest    string   // the namespace attribute, the key of the non-default args line
	action  optAction
	value   valueType
	class   string   // the config class a JSON value is validated as (vDataclass, vOptDataclass)
	nargs   byte     // 0: argparse's default (one value; none for the valueless actions), '?' or '+'
	konst   string   // nargs '?' given no value: the const, as Python prints it
	choices []string // as argparse prints them, in vLLM's order
	def     string   // the default, as Python prints it in the non-default args line
}

// serveOptions are vllm serve's options (the positional model_tag aside). Typed per vLLM's
// field types: int for the parallel sizes, human_readable_int for --max-model-len, JSON for
// --compilation-config/-O, --speculative-config, --hf-overrides, --kv-transfer-config, and so on.
func serveOptions() []serveOption {
	return []serveOption{
		{flags: []string{"-h", "--help"}, dest: "help", action: actHelp},
		{flags: []string{"--headless"}, dest: "headless", action: actStoreTrue, def: "False"},
		{flags: []string{"--api-server-count", "-asc"}, dest: "api_server_count", action: actStore, value: vInt, def: "1"},
		{flags: []string{"--config"}, dest: "config", action: actStore, value: vRaw, def: "None"},
		{flags: []string{"--host"}, dest: "host", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--port"}, dest: "port", action: actStore, value: vInt, def: "8000"},
		{flags: []string{"--uds"}, dest: "uds", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--uvicorn-log-level"}, dest: "uvicorn_log_level", action: actStore, value: vStr, choices: []string{"critical", "debug", "error", "info", "trace", "warning"}, def: "'info'"},
		{flags: []string{"--disable-uvicorn-access-log", "--no-disable-uvicorn-access-log"}, dest: "disable_uvicorn_access_log", action: actBoolOpt, def: "False"},
		{flags: []string{"--allow-credentials", "--no-allow-credentials"}, dest: "allow_credentials", action: actBoolOpt, def: "False"},
		{flags: []string{"--allowed-origins"}, dest: "allowed_origins", action: actStore, value: vLoads, def: "['*']"},
		{flags: []string{"--allowed-methods"}, dest: "allowed_methods", action: actStore, value: vLoads, def: "['*']"},
		{flags: []string{"--allowed-headers"}, dest: "allowed_headers", action: actStore, value: vLoads, def: "['*']"},
		{flags: []string{"--api-key"}, dest: "api_key", action: actStore, value: vOptStr, nargs: '+', def: "None"},
		{flags: []string{"--lora-modules"}, dest: "lora_modules", action: actLoRA, value: vOptStr, nargs: '+', def: "None"},
		{flags: []string{"--chat-template"}, dest: "chat_template", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--chat-template-content-format"}, dest: "chat_template_content_format", action: actStore, value: vStr, def: "'auto'"},
		{flags: []string{"--trust-request-chat-template", "--no-trust-request-chat-template"}, dest: "trust_request_chat_template", action: actBoolOpt, def: "False"},
		{flags: []string{"--response-role"}, dest: "response_role", action: actStore, value: vStr, def: "'assistant'"},
		{flags: []string{"--ssl-keyfile"}, dest: "ssl_keyfile", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--ssl-certfile"}, dest: "ssl_certfile", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--ssl-ca-certs"}, dest: "ssl_ca_certs", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--enable-ssl-refresh", "--no-enable-ssl-refresh"}, dest: "enable_ssl_refresh", action: actBoolOpt, def: "False"},
		{flags: []string{"--ssl-cert-reqs"}, dest: "ssl_cert_reqs", action: actStore, value: vInt, def: "0"},
		{flags: []string{"--root-path"}, dest: "root_path", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--middleware"}, dest: "middleware", action: actAppend, value: vStr, def: "[]"},
		{flags: []string{"--return-tokens-as-token-ids", "--no-return-tokens-as-token-ids"}, dest: "return_tokens_as_token_ids", action: actBoolOpt, def: "False"},
		{flags: []string{"--disable-frontend-multiprocessing", "--no-disable-frontend-multiprocessing"}, dest: "disable_frontend_multiprocessing", action: actBoolOpt, def: "False"},
		{flags: []string{"--enable-request-id-headers", "--no-enable-request-id-headers"}, dest: "enable_request_id_headers", action: actBoolOpt, def: "False"},
		{flags: []string{"--enable-auto-tool-choice", "--no-enable-auto-tool-choice"}, dest: "enable_auto_tool_choice", action: actBoolOpt, def: "False"},
		{flags: []string{"--exclude-tools-when-tool-choice-none", "--no-exclude-tools-when-tool-choice-none"}, dest: "exclude_tools_when_tool_choice_none", action: actBoolOpt, def: "False"},
		{flags: []string{"--tool-call-parser"}, dest: "tool_call_parser", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--tool-parser-plugin"}, dest: "tool_parser_plugin", action: actStore, value: vStr, def: "''"},
		{flags: []string{"--tool-server"}, dest: "tool_server", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--log-config-file"}, dest: "log_config_file", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--max-log-len"}, dest: "max_log_len", action: actStore, value: vOptInt, def: "None"},
		{flags: []string{"--disable-fastapi-docs", "--no-disable-fastapi-docs"}, dest: "disable_fastapi_docs", action: actBoolOpt, def: "False"},
		{flags: []string{"--enable-prompt-tokens-details", "--no-enable-prompt-tokens-details"}, dest: "enable_prompt_tokens_details", action: actBoolOpt, def: "False"},
		{flags: []string{"--enable-server-load-tracking", "--no-enable-server-load-tracking"}, dest: "enable_server_load_tracking", action: actBoolOpt, def: "False"},
		{flags: []string{"--enable-force-include-usage", "--no-enable-force-include-usage"}, dest: "enable_force_include_usage", action: actBoolOpt, def: "False"},
		{flags: []string{"--enable-tokenizer-info-endpoint", "--no-enable-tokenizer-info-endpoint"}, dest: "enable_tokenizer_info_endpoint", action: actBoolOpt, def: "False"},
		{flags: []string{"--enable-log-outputs", "--no-enable-log-outputs"}, dest: "enable_log_outputs", action: actBoolOpt, def: "False"},
		{flags: []string{"--h11-max-incomplete-event-size"}, dest: "h11_max_incomplete_event_size", action: actStore, value: vInt, def: "4194304"},
		{flags: []string{"--h11-max-header-count"}, dest: "h11_max_header_count", action: actStore, value: vInt, def: "256"},
		{flags: []string{"--log-error-stack", "--no-log-error-stack"}, dest: "log_error_stack", action: actBoolOpt, def: "False"},
		{flags: []string{"--model"}, dest: "model", action: actStore, value: vStr, def: "'Qwen/Qwen3-0.6B'"},
		{flags: []string{"--runner"}, dest: "runner", action: actStore, value: vStr, choices: []string{"auto", "draft", "generate", "pooling"}, def: "'auto'"},
		{flags: []string{"--convert"}, dest: "convert", action: actStore, value: vStr, choices: []string{"auto", "classify", "embed", "none", "reward"}, def: "'auto'"},
		{flags: []string{"--task"}, dest: "task", action: actStore, value: vOptStr, choices: []string{"auto", "classify", "draft", "embed", "embedding", "generate", "reward", "score", "transcription", "None"}, def: "None"},
		{flags: []string{"--tokenizer"}, dest: "tokenizer", action: actStore, value: vStr, def: "None"},
		{flags: []string{"--tokenizer-mode"}, dest: "tokenizer_mode", action: actStore, value: vStr, choices: []string{"auto", "custom", "mistral", "slow"}, def: "'auto'"},
		{flags: []string{"--trust-remote-code", "--no-trust-remote-code"}, dest: "trust_remote_code", action: actBoolOpt, def: "False"},
		{flags: []string{"--dtype"}, dest: "dtype", action: actStore, value: vStr, choices: []string{"auto", "bfloat16", "float", "float16", "float32", "half"}, def: "'auto'"},
		{flags: []string{"--seed"}, dest: "seed", action: actStore, value: vOptInt, def: "None"},
		{flags: []string{"--hf-config-path"}, dest: "hf_config_path", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--allowed-local-media-path"}, dest: "allowed_local_media_path", action: actStore, value: vStr, def: "''"},
		{flags: []string{"--allowed-media-domains"}, dest: "allowed_media_domains", action: actStore, value: vOptStr, nargs: '+', def: "None"},
		{flags: []string{"--revision"}, dest: "revision", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--code-revision"}, dest: "code_revision", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--rope-scaling"}, dest: "rope_scaling", action: actStore, value: vJSONDict, def: "{}"},
		{flags: []string{"--rope-theta"}, dest: "rope_theta", action: actStore, value: vOptFloat, def: "None"},
		{flags: []string{"--tokenizer-revision"}, dest: "tokenizer_revision", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--max-model-len"}, dest: "max_model_len", action: actStore, value: vHumanInt, def: "None"},
		{flags: []string{"--quantization", "-q"}, dest: "quantization", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--enforce-eager", "--no-enforce-eager"}, dest: "enforce_eager", action: actBoolOpt, def: "False"},
		{flags: []string{"--max-logprobs"}, dest: "max_logprobs", action: actStore, value: vInt, def: "20"},
		{flags: []string{"--logprobs-mode"}, dest: "logprobs_mode", action: actStore, value: vStr, choices: []string{"processed_logits", "processed_logprobs", "raw_logits", "raw_logprobs"}, def: "'raw_logprobs'"},
		{flags: []string{"--disable-sliding-window", "--no-disable-sliding-window"}, dest: "disable_sliding_window", action: actBoolOpt, def: "False"},
		{flags: []string{"--disable-cascade-attn", "--no-disable-cascade-attn"}, dest: "disable_cascade_attn", action: actBoolOpt, def: "False"},
		{flags: []string{"--skip-tokenizer-init", "--no-skip-tokenizer-init"}, dest: "skip_tokenizer_init", action: actBoolOpt, def: "False"},
		{flags: []string{"--enable-prompt-embeds", "--no-enable-prompt-embeds"}, dest: "enable_prompt_embeds", action: actBoolOpt, def: "False"},
		{flags: []string{"--served-model-name"}, dest: "served_model_name", action: actStore, value: vOptStr, nargs: '+', def: "None"},
		{flags: []string{"--config-format"}, dest: "config_format", action: actStore, value: vStr, def: "'auto'"},
		{flags: []string{"--hf-token"}, dest: "hf_token", action: actStore, value: vStr, nargs: '?', konst: "True", def: "None"},
		{flags: []string{"--hf-overrides"}, dest: "hf_overrides", action: actStore, value: vDictOrStr, def: "{}"},
		{flags: []string{"--pooler-config"}, dest: "pooler_config", action: actStore, value: vOptDataclass, class: "PoolerConfig", def: "None"},
		{flags: []string{"--override-pooler-config"}, dest: "override_pooler_config", action: actStore, value: vOptDataclass, class: "PoolerConfig", def: "None"},
		{flags: []string{"--logits-processor-pattern"}, dest: "logits_processor_pattern", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--generation-config"}, dest: "generation_config", action: actStore, value: vStr, def: "'auto'"},
		{flags: []string{"--override-generation-config"}, dest: "override_generation_config", action: actStore, value: vJSONDict, def: "{}"},
		{flags: []string{"--enable-sleep-mode", "--no-enable-sleep-mode"}, dest: "enable_sleep_mode", action: actBoolOpt, def: "False"},
		{flags: []string{"--model-impl"}, dest: "model_impl", action: actStore, value: vStr, def: "'auto'"},
		{flags: []string{"--override-attention-dtype"}, dest: "override_attention_dtype", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--logits-processors"}, dest: "logits_processors", action: actStore, value: vOptStr, nargs: '+', def: "None"},
		{flags: []string{"--io-processor-plugin"}, dest: "io_processor_plugin", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--load-format"}, dest: "load_format", action: actStore, value: vStr, def: "'auto'"},
		{flags: []string{"--download-dir"}, dest: "download_dir", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--safetensors-load-strategy"}, dest: "safetensors_load_strategy", action: actStore, value: vStr, def: "'lazy'"},
		{flags: []string{"--model-loader-extra-config"}, dest: "model_loader_extra_config", action: actStore, value: vDictOrStr, def: "{}"},
		{flags: []string{"--ignore-patterns"}, dest: "ignore_patterns", action: actStore, value: vOptStr, nargs: '+', def: "None"},
		{flags: []string{"--use-tqdm-on-load", "--no-use-tqdm-on-load"}, dest: "use_tqdm_on_load", action: actBoolOpt, def: "True"},
		{flags: []string{"--pt-load-map-location"}, dest: "pt_load_map_location", action: actStore, value: vDictOrStr, def: "'cpu'"},
		{flags: []string{"--reasoning-parser"}, dest: "reasoning_parser", action: actStore, value: vStr, choices: []string{"deepseek_r1", "glm45", "openai_gptoss", "granite", "hunyuan_a13b", "mistral", "qwen3", "seed_oss", "step3"}, def: "''"},
		{flags: []string{"--guided-decoding-backend"}, dest: "guided_decoding_backend", action: actStore, value: vStr, def: "None"},
		{flags: []string{"--guided-decoding-disable-fallback"}, dest: "guided_decoding_disable_fallback", action: actStore, value: vBool, def: "None"},
		{flags: []string{"--guided-decoding-disable-any-whitespace"}, dest: "guided_decoding_disable_any_whitespace", action: actStore, value: vBool, def: "None"},
		{flags: []string{"--guided-decoding-disable-additional-properties"}, dest: "guided_decoding_disable_additional_properties", action: actStore, value: vBool, def: "None"},
		{flags: []string{"--distributed-executor-backend"}, dest: "distributed_executor_backend", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--pipeline-parallel-size", "-pp"}, dest: "pipeline_parallel_size", action: actStore, value: vInt, def: "1"},
		{flags: []string{"--tensor-parallel-size", "-tp"}, dest: "tensor_parallel_size", action: actStore, value: vInt, def: "1"},
		{flags: []string{"--decode-context-parallel-size", "-dcp"}, dest: "decode_context_parallel_size", action: actStore, value: vInt, def: "1"},
		{flags: []string{"--data-parallel-size", "-dp"}, dest: "data_parallel_size", action: actStore, value: vInt, def: "1"},
		{flags: []string{"--data-parallel-rank", "-dpn"}, dest: "data_parallel_rank", action: actStore, value: vInt, def: "None"},
		{flags: []string{"--data-parallel-start-rank", "-dpr"}, dest: "data_parallel_start_rank", action: actStore, value: vInt, def: "None"},
		{flags: []string{"--data-parallel-size-local", "-dpl"}, dest: "data_parallel_size_local", action: actStore, value: vInt, def: "None"},
		{flags: []string{"--data-parallel-address", "-dpa"}, dest: "data_parallel_address", action: actStore, value: vStr, def: "None"},
		{flags: []string{"--data-parallel-rpc-port", "-dpp"}, dest: "data_parallel_rpc_port", action: actStore, value: vInt, def: "None"},
		{flags: []string{"--data-parallel-backend", "-dpb"}, dest: "data_parallel_backend", action: actStore, value: vStr, def: "'mp'"},
		{flags: []string{"--data-parallel-hybrid-lb", "--no-data-parallel-hybrid-lb"}, dest: "data_parallel_hybrid_lb", action: actBoolOpt, def: "False"},
		{flags: []string{"--enable-expert-parallel", "--no-enable-expert-parallel"}, dest: "enable_expert_parallel", action: actBoolOpt, def: "False"},
		{flags: []string{"--enable-dbo", "--no-enable-dbo"}, dest: "enable_dbo", action: actBoolOpt, def: "False"},
		{flags: []string{"--dbo-decode-token-threshold"}, dest: "dbo_decode_token_threshold", action: actStore, value: vInt, def: "32"},
		{flags: []string{"--dbo-prefill-token-threshold"}, dest: "dbo_prefill_token_threshold", action: actStore, value: vInt, def: "512"},
		{flags: []string{"--enable-eplb", "--no-enable-eplb"}, dest: "enable_eplb", action: actBoolOpt, def: "False"},
		{flags: []string{"--eplb-config"}, dest: "eplb_config", action: actStore, value: vDataclass, class: "EPLBConfig", def: "{}"},
		{flags: []string{"--expert-placement-strategy"}, dest: "expert_placement_strategy", action: actStore, value: vStr, choices: []string{"linear", "round_robin"}, def: "'linear'"},
		{flags: []string{"--num-redundant-experts"}, dest: "num_redundant_experts", action: actStore, value: vInt, def: "None"},
		{flags: []string{"--eplb-window-size"}, dest: "eplb_window_size", action: actStore, value: vInt, def: "None"},
		{flags: []string{"--eplb-step-interval"}, dest: "eplb_step_interval", action: actStore, value: vInt, def: "None"},
		{flags: []string{"--eplb-log-balancedness", "--no-eplb-log-balancedness"}, dest: "eplb_log_balancedness", action: actBoolOpt, def: "None"},
		{flags: []string{"--max-parallel-loading-workers"}, dest: "max_parallel_loading_workers", action: actStore, value: vOptInt, def: "None"},
		{flags: []string{"--ray-workers-use-nsight", "--no-ray-workers-use-nsight"}, dest: "ray_workers_use_nsight", action: actBoolOpt, def: "False"},
		{flags: []string{"--disable-custom-all-reduce", "--no-disable-custom-all-reduce"}, dest: "disable_custom_all_reduce", action: actBoolOpt, def: "False"},
		{flags: []string{"--worker-cls"}, dest: "worker_cls", action: actStore, value: vStr, def: "'auto'"},
		{flags: []string{"--worker-extension-cls"}, dest: "worker_extension_cls", action: actStore, value: vStr, def: "''"},
		{flags: []string{"--enable-multimodal-encoder-data-parallel"}, dest: "enable_multimodal_encoder_data_parallel", action: actStoreTrue, def: "False"},
		{flags: []string{"--block-size"}, dest: "block_size", action: actStore, value: vInt, choices: []string{"1", "8", "16", "32", "64", "128"}, def: "None"},
		{flags: []string{"--gpu-memory-utilization"}, dest: "gpu_memory_utilization", action: actStore, value: vFloat, def: "0.9"},
		{flags: []string{"--kv-cache-memory-bytes"}, dest: "kv_cache_memory_bytes", action: actStore, value: vOptHumanInt, def: "None"},
		{flags: []string{"--swap-space"}, dest: "swap_space", action: actStore, value: vFloat, def: "4"},
		{flags: []string{"--kv-cache-dtype"}, dest: "kv_cache_dtype", action: actStore, value: vStr, choices: []string{"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"}, def: "'auto'"},
		{flags: []string{"--num-gpu-blocks-override"}, dest: "num_gpu_blocks_override", action: actStore, value: vOptInt, def: "None"},
		{flags: []string{"--enable-prefix-caching", "--no-enable-prefix-caching"}, dest: "enable_prefix_caching", action: actBoolOpt, def: "None"},
		{flags: []string{"--prefix-caching-hash-algo"}, dest: "prefix_caching_hash_algo", action: actStore, value: vStr, choices: []string{"sha256", "sha256_cbor"}, def: "'sha256'"},
		{flags: []string{"--cpu-offload-gb"}, dest: "cpu_offload_gb", action: actStore, value: vFloat, def: "0"},
		{flags: []string{"--calculate-kv-scales", "--no-calculate-kv-scales"}, dest: "calculate_kv_scales", action: actBoolOpt, def: "False"},
		{flags: []string{"--kv-sharing-fast-prefill", "--no-kv-sharing-fast-prefill"}, dest: "kv_sharing_fast_prefill", action: actBoolOpt, def: "False"},
		{flags: []string{"--mamba-cache-dtype"}, dest: "mamba_cache_dtype", action: actStore, value: vStr, choices: []string{"auto", "float32"}, def: "'auto'"},
		{flags: []string{"--mamba-ssm-cache-dtype"}, dest: "mamba_ssm_cache_dtype", action: actStore, value: vStr, choices: []string{"auto", "float32"}, def: "'auto'"},
		{flags: []string{"--limit-mm-per-prompt"}, dest: "limit_mm_per_prompt", action: actStore, value: vJSONDict, def: "{}"},
		{flags: []string{"--media-io-kwargs"}, dest: "media_io_kwargs", action: actStore, value: vJSONDict, def: "{}"},
		{flags: []string{"--mm-processor-kwargs"}, dest: "mm_processor_kwargs", action: actStore, value: vOptJSONDict, def: "None"},
		{flags: []string{"--mm-processor-cache-gb"}, dest: "mm_processor_cache_gb", action: actStore, value: vFloat, def: "4"},
		{flags: []string{"--disable-mm-preprocessor-cache"}, dest: "disable_mm_preprocessor_cache", action: actStoreTrue, def: "False"},
		{flags: []string{"--mm-processor-cache-type"}, dest: "mm_processor_cache_type", action: actStore, value: vStr, choices: []string{"lru", "shm"}, def: "'lru'"},
		{flags: []string{"--mm-shm-cache-max-object-size-mb"}, dest: "mm_shm_cache_max_object_size_mb", action: actStore, value: vInt, def: "128"},
		{flags: []string{"--mm-encoder-tp-mode"}, dest: "mm_encoder_tp_mode", action: actStore, value: vStr, choices: []string{"data", "weights"}, def: "'weights'"},
		{flags: []string{"--interleave-mm-strings", "--no-interleave-mm-strings"}, dest: "interleave_mm_strings", action: actBoolOpt, def: "False"},
		{flags: []string{"--skip-mm-profiling", "--no-skip-mm-profiling"}, dest: "skip_mm_profiling", action: actBoolOpt, def: "False"},
		{flags: []string{"--video-pruning-rate"}, dest: "video_pruning_rate", action: actStore, value: vOptFloat, def: "None"},
		{flags: []string{"--enable-lora", "--no-enable-lora"}, dest: "enable_lora", action: actBoolOpt, def: "None"},
		{flags: []string{"--enable-lora-bias", "--no-enable-lora-bias"}, dest: "enable_lora_bias", action: actBoolOpt, def: "False"},
		{flags: []string{"--max-loras"}, dest: "max_loras", action: actStore, value: vInt, def: "1"},
		{flags: []string{"--max-lora-rank"}, dest: "max_lora_rank", action: actStore, value: vInt, choices: []string{"1", "8", "16", "32", "64", "128", "256", "320", "512"}, def: "16"},
		{flags: []string{"--lora-extra-vocab-size"}, dest: "lora_extra_vocab_size", action: actStore, value: vInt, def: "256"},
		{flags: []string{"--lora-dtype"}, dest: "lora_dtype", action: actStore, value: vStr, choices: []string{"auto", "bfloat16", "float16"}, def: "'auto'"},
		{flags: []string{"--max-cpu-loras"}, dest: "max_cpu_loras", action: actStore, value: vOptInt, def: "None"},
		{flags: []string{"--fully-sharded-loras", "--no-fully-sharded-loras"}, dest: "fully_sharded_loras", action: actBoolOpt, def: "False"},
		{flags: []string{"--default-mm-loras"}, dest: "default_mm_loras", action: actStore, value: vOptJSONDict, def: "None"},
		{flags: []string{"--show-hidden-metrics-for-version"}, dest: "show_hidden_metrics_for_version", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--otlp-traces-endpoint"}, dest: "otlp_traces_endpoint", action: actStore, value: vOptStr, def: "None"},
		{flags: []string{"--collect-detailed-traces"}, dest: "collect_detailed_traces", action: actStore, value: vOptStr, nargs: '+', choices: []string{"all", "model", "worker", "None", "model,worker", "model,all", "worker,model", "worker,all", "all,model", "all,worker"}, def: "None"},
		{flags: []string{"--max-num-batched-tokens"}, dest: "max_num_batched_tokens", action: actStore, value: vHumanInt, def: "None"},
		{flags: []string{"--max-num-seqs"}, dest: "max_num_seqs", action: actStore, value: vInt, def: "None"},
		{flags: []string{"--max-num-partial-prefills"}, dest: "max_num_partial_prefills", action: actStore, value: vInt, def: "1"},
		{flags: []string{"--max-long-partial-prefills"}, dest: "max_long_partial_prefills", action: actStore, value: vInt, def: "1"},
		{flags: []string{"--cuda-graph-sizes"}, dest: "cuda_graph_sizes", action: actStore, value: vInt, nargs: '+', def: "[]"},
		{flags: []string{"--long-prefill-token-threshold"}, dest: "long_prefill_token_threshold", action: actStore, value: vInt, def: "0"},
		{flags: []string{"--num-lookahead-slots"}, dest: "num_lookahead_slots", action: actStore, value: vInt, def: "0"},
		{flags: []string{"--scheduling-policy"}, dest: "scheduling_policy", action: actStore, value: vStr, choices: []string{"fcfs", "priority"}, def: "'fcfs'"},
		{flags: []string{"--enable-chunked-prefill", "--no-enable-chunked-prefill"}, dest: "enable_chunked_prefill", action: actBoolOpt, def: "None"},
		{flags: []string{"--disable-chunked-mm-input", "--no-disable-chunked-mm-input"}, dest: "disable_chunked_mm_input", action: actBoolOpt, def: "False"},
		{flags: []string{"--scheduler-cls"}, dest: "scheduler_cls", action: actStore, value: vStr, def: "'vllm.core.scheduler.Scheduler'"},
		{flags: []string{"--disable-hybrid-kv-cache-manager", "--no-disable-hybrid-kv-cache-manager"}, dest: "disable_hybrid_kv_cache_manager", action: actBoolOpt, def: "False"},
		{flags: []string{"--async-scheduling", "--no-async-scheduling"}, dest: "async_scheduling", action: actBoolOpt, def: "False"},
		{flags: []string{"--speculative-config"}, dest: "speculative_config", action: actStore, value: vOptJSON, def: "None"},
		{flags: []string{"--kv-transfer-config"}, dest: "kv_transfer_config", action: actStore, value: vOptDataclass, class: "KVTransferConfig", def: "None"},
		{flags: []string{"--kv-events-config"}, dest: "kv_events_config", action: actStore, value: vOptDataclass, class: "KVEventsConfig", def: "None"},
		{flags: []string{"--compilation-config", "-O"}, dest: "compilation_config", action: actStore, value: vDataclass, class: "CompilationConfig", def: "{}"},
		{flags: []string{"--additional-config"}, dest: "additional_config", action: actStore, value: vDictOrStr, def: "{}"},
		{flags: []string{"--structured-outputs-config"}, dest: "structured_outputs_config", action: actStore, value: vDataclass, class: "StructuredOutputsConfig", def: "{}"},
		{flags: []string{"--disable-log-stats"}, dest: "disable_log_stats", action: actStoreTrue, def: "False"},
		{flags: []string{"--enable-log-requests", "--no-enable-log-requests"}, dest: "enable_log_requests", action: actBoolOpt, def: "False"},
		{flags: []string{"--disable-log-requests", "--no-disable-log-requests"}, dest: "disable_log_requests", action: actBoolOpt, def: "True"},
	}
}
