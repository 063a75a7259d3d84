// The fake SGLang's command line: launch_server's options (flags.go) parsed as
// prepare_server_args parses them, with CPython's argparse (package argparse): its refusals
// ("launch_server.py: error: ...", after the usage block, exit 2); then ServerArgs' defaults
// and the checks its __post_init__ makes, whose AssertionError ends the launcher (exit 1).

package sglang

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/example/inferenceservice-operator/test/localcluster/argparse"
)

// prog is argparse's prog: sys.argv[0]'s base name, which `python3 -m sglang.launch_server`
// sets to the module's file.
const prog = "launch_server.py"

// defaultPort is ServerArgs.port's default.
const defaultPort = 30000

// loraRef is one --lora-paths entry (LoRAPathAction): PATH, NAME=PATH or a JSON object.
type loraRef struct {
	Name   string `json:"lora_name"`
	Path   string `json:"lora_path"`
	Pinned bool   `json:"pinned"`
}

// serverArgs is a parsed command line with ServerArgs' defaults filled in.
type serverArgs struct {
	ns                argparse.Namespace
	modelPath         string
	servedName        string
	host              string
	port              int
	tp, pp, dp        int
	memFraction       float64 // 0: the default for the GPUs' memory and tp
	maxRunning        int     // 0: from the token pool
	maxQueued         int     // 0: unbounded
	maxTotalTokens    int     // 0: from the memory
	contextLength     int     // 0: the model's
	chunkedPrefill    int
	maxPrefillTokens  int
	enableMetrics     bool
	apiKey            string
	enableLoRA        bool
	maxLoRARank       int // 0: None
	loraTargets       []string
	loraPaths         []loraRef
	maxLoRAsPerBatch  int
	maxLoadedLoRAs    int // 0: None
	distInitAddr      string
	nnodes, nodeRank  int
	distTimeout       int // seconds; 0: torch's default
	disableCUDAGraph  bool
	cudaGraphMaxBS    int
	skipWarmup        bool
	downloadDir       string
	trustRemoteCode   bool
	decodeLogInterval int
	logLevelHTTP      string
	ttftBuckets       []float64
	explicit          map[string]bool // dests given on the command line
}

// parseServerArgs parses argv as prepare_server_args does.
func parseServerArgs(argv []string) (*serverArgs, error) {
	ns, err := argparse.New(prog, serverOptions()).Parse(argv)
	if err != nil {
		return nil, err
	}
	a := &serverArgs{ns: ns, explicit: map[string]bool{}}
	for k := range ns {
		a.explicit[k] = true
	}
	str := func(dest, def string) string {
		if v, ok := ns[dest].(string); ok {
			return v
		}
		return def
	}
	num := func(dest string, def int) int {
		if v, ok := ns[dest].(int); ok {
			return v
		}
		return def
	}
	on := func(dest string) bool { v, _ := ns[dest].(bool); return v }
	a.modelPath = str("model_path", "")
	a.servedName = str("served_model_name", a.modelPath)
	a.host = str("host", "127.0.0.1")
	a.port = num("port", defaultPort)
	a.tp = num("tensor_parallel_size", 1)
	a.pp = num("pipeline_parallel_size", 1)
	a.dp = num("data_parallel_size", 1)
	if v, ok := ns["mem_fraction_static"].(float64); ok {
		a.memFraction = v
	}
	a.maxRunning = num("max_running_requests", 0)
	a.maxQueued = num("max_queued_requests", 0)
	a.maxTotalTokens = num("max_total_tokens", 0)
	a.contextLength = num("context_length", 0)
	a.chunkedPrefill = num("chunked_prefill_size", 8192)
	a.maxPrefillTokens = num("max_prefill_tokens", 16384)
	a.enableMetrics = on("enable_metrics")
	a.apiKey = str("api_key", "")
	a.enableLoRA = on("enable_lora")
	a.maxLoRARank = num("max_lora_rank", 0)
	if l, ok := ns["lora_target_modules"].([]any); ok {
		for _, m := range l {
			a.loraTargets = append(a.loraTargets, m.(string))
		}
	}
	if l, ok := ns["lora_paths"].([]any); ok {
		for _, p := range l {
			ref, err := parseLoRAPath(p.(string))
			if err != nil {
				return nil, err
			}
			a.loraPaths = append(a.loraPaths, ref)
		}
	}
	a.maxLoRAsPerBatch = num("max_loras_per_batch", 8)
	a.maxLoadedLoRAs = num("max_loaded_loras", 0)
	a.distInitAddr = str("dist_init_addr", "")
	a.nnodes = num("nnodes", 1)
	a.nodeRank = num("node_rank", 0)
	a.distTimeout = num("dist_timeout", 0)
	a.disableCUDAGraph = on("disable_cuda_graph")
	a.cudaGraphMaxBS = num("cuda_graph_max_bs", 0)
	a.skipWarmup = on("skip_server_warmup")
	a.downloadDir = str("download_dir", "")
	a.trustRemoteCode = on("trust_remote_code")
	a.decodeLogInterval = num("decode_log_interval", 40)
	a.logLevelHTTP = str("log_level_http", str("log_level", "info"))
	if l, ok := ns["bucket_time_to_first_token"].([]any); ok {
		for _, b := range l {
			a.ttftBuckets = append(a.ttftBuckets, b.(float64))
		}
	}
	return a, nil
}

// parseLoRAPath is LoRAPathAction's reading of one --lora-paths value.
func parseLoRAPath(s string) (loraRef, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "{") {
		var r loraRef
		if err := json.Unmarshal([]byte(s), &r); err != nil || r.Name == "" || r.Path == "" {
			return loraRef{}, &argparse.Error{Prog: prog, Msg: fmt.Sprintf("argument --lora-paths: Invalid JSON format for LoRA path: %s", s)}
		}
		return r, nil
	}
	if name, p, ok := strings.Cut(s, "="); ok {
		return loraRef{Name: name, Path: p}, nil
	}
	return loraRef{Name: s, Path: s}, nil
}

// postInitError is an AssertionError (or another exception) ServerArgs.__post_init__ raises:
// a traceback from the launcher's main module, exit 1.
type postInitError struct {
	frames []string // from __post_init__ down
	exc    string
}

func (e *postInitError) Error() string { return e.exc }

// check is what ServerArgs.__post_init__ and check_server_args refuse of the parsed values,
// in their order; nil: the arguments stand.
func (a *serverArgs) check() error {
	if a.enableLoRA || len(a.loraPaths) > 0 {
		a.enableLoRA = true // lora_paths enables LoRA, for backward compatibility
		if a.maxLoadedLoRAs > 0 {
			if a.maxLoadedLoRAs < a.maxLoRAsPerBatch {
				return &postInitError{frames: loraFrames, exc: fmt.Sprintf("AssertionError: max_loaded_loras should be greater than or equal to max_loras_per_batch. "+
					"max_loaded_loras=%d, max_loras_per_batch=%d", a.maxLoadedLoRAs, a.maxLoRAsPerBatch)}
			}
			if len(a.loraPaths) > a.maxLoadedLoRAs {
				return &postInitError{frames: loraFrames, exc: fmt.Sprintf("AssertionError: The number of LoRA paths should not exceed max_loaded_loras. "+
					"max_loaded_loras=%d, lora_paths=%d", a.maxLoadedLoRAs, len(a.loraPaths))}
			}
		}
	}
	if a.nnodes < 1 || (a.tp*a.pp)%a.nnodes != 0 {
		return &postInitError{frames: checkFrames, exc: "AssertionError: tp_size must be divisible by number of nodes"}
	}
	if a.dp > 1 && a.nnodes != 1 {
		return &postInitError{frames: checkFrames, exc: "AssertionError: multi-node data parallel is not supported unless dp attention!"}
	}
	return nil
}

// The frames of a ServerArgs failure, below launch_server's module (run.go's launcherFrames).
// Line numbers are near v0.5.3's; a real process prints its own.
var (
	postInitFrames = []string{
		`  File "` + srcDir + `/server_args.py", line 3179, in prepare_server_args`,
		"    return ServerArgs.from_cli_args(raw_args)",
		`  File "` + srcDir + `/server_args.py", line 2971, in from_cli_args`,
		"    return cls(**{attr: getattr(args, attr) for attr in attrs})",
		`  File "<string>", line 283, in __init__`,
	}
	loraFrames = append(append([]string(nil), postInitFrames...),
		`  File "`+srcDir+`/server_args.py", line 566, in __post_init__`,
		"    self._handle_lora_args()",
		`  File "`+srcDir+`/server_args.py", line 2867, in _handle_lora_args`,
		"    assert (")
	checkFrames = append(append([]string(nil), postInitFrames...),
		`  File "`+srcDir+`/server_args.py", line 581, in __post_init__`,
		"    self.check_server_args()",
		`  File "`+srcDir+`/server_args.py", line 2805, in check_server_args`,
		"    assert (")
	hfConfigFrames = append(append([]string(nil), postInitFrames...),
		`  File "`+srcDir+`/server_args.py", line 548, in __post_init__`,
		"    self._handle_model_specific_adjustments()",
		`  File "`+srcDir+`/server_args.py", line 1032, in _handle_model_specific_adjustments`,
		"    hf_config = self.get_hf_config()",
		`  File "`+srcDir+`/utils/hf_transformers_utils.py", line 224, in get_config`,
		"    config = AutoConfig.from_pretrained(",
		`  File "`+pyLib+`/transformers/utils/hub.py", line 478, in cached_files`,
		"    raise OSError(")
	gpuMemFrames = append(append([]string(nil), postInitFrames...),
		`  File "`+srcDir+`/server_args.py", line 535, in __post_init__`,
		"    self._handle_gpu_memory_settings(gpu_mem)",
		`  File "`+srcDir+`/utils/common.py", line 1562, in get_nvgpu_memory_capacity`,
		"    raise RuntimeError(")
)
