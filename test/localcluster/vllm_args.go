// The fake vLLM's command line: `vllm serve` (or the api_server module) parsed as vLLM
// v0.11's argparse parser does, with its error text and exit code 2 for what it rejects.

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// argKind is how argparse converts a flag's value.
type argKind int

const (
	argStr   argKind = iota
	argInt           // type=int
	argFloat         // type=float
	argBool          // BooleanOptionalAction: --x / --no-x, no value
	argList          // nargs="+"
)

// serveFlag is one option vLLM's parser knows; dest is the non-default-args key.
type serveFlag struct {
	dest string
	kind argKind
}

// serveFlags are the options the fake understands; vLLM has more, and any other one is
// rejected as argparse rejects a flag it does not know.
var serveFlags = map[string]serveFlag{
	"--model":                        {"model", argStr},
	"--host":                         {"host", argStr},
	"--port":                         {"port", argInt},
	"--tensor-parallel-size":         {"tensor_parallel_size", argInt},
	"-tp":                            {"tensor_parallel_size", argInt},
	"--pipeline-parallel-size":       {"pipeline_parallel_size", argInt},
	"-pp":                            {"pipeline_parallel_size", argInt},
	"--data-parallel-size":           {"data_parallel_size", argInt},
	"--max-num-seqs":                 {"max_num_seqs", argInt},
	"--max-num-batched-tokens":       {"max_num_batched_tokens", argInt},
	"--max-model-len":                {"max_model_len", argStr}, // accepts 32k, 1M
	"--gpu-memory-utilization":       {"gpu_memory_utilization", argFloat},
	"--served-model-name":            {"served_model_name", argList},
	"--enable-lora":                  {"enable_lora", argBool},
	"--lora-modules":                 {"lora_modules", argList},
	"--max-loras":                    {"max_loras", argInt},
	"--max-lora-rank":                {"max_lora_rank", argInt},
	"--max-cpu-loras":                {"max_cpu_loras", argInt},
	"--trust-remote-code":            {"trust_remote_code", argBool},
	"--dtype":                        {"dtype", argStr},
	"--download-dir":                 {"download_dir", argStr},
	"--enforce-eager":                {"enforce_eager", argBool},
	"--disable-log-requests":         {"disable_log_requests", argBool},
	"--enable-log-requests":          {"enable_log_requests", argBool},
	"--disable-log-stats":            {"disable_log_stats", argBool},
	"--disable-uvicorn-access-log":   {"disable_uvicorn_access_log", argBool},
	"--uvicorn-log-level":            {"uvicorn_log_level", argStr},
	"--quantization":                 {"quantization", argStr},
	"-q":                             {"quantization", argStr},
	"--kv-cache-dtype":               {"kv_cache_dtype", argStr},
	"--enable-prefix-caching":        {"enable_prefix_caching", argBool},
	"--enable-chunked-prefill":       {"enable_chunked_prefill", argBool},
	"--seed":                         {"seed", argInt},
	"--api-key":                      {"api_key", argList},
	"--tokenizer":                    {"tokenizer", argStr},
	"--revision":                     {"revision", argStr},
	"--load-format":                  {"load_format", argStr},
	"--swap-space":                   {"swap_space", argFloat},
	"--block-size":                   {"block_size", argInt},
	"--distributed-executor-backend": {"distributed_executor_backend", argStr},
	"--generation-config":            {"generation_config", argStr},
	"--chat-template":                {"chat_template", argStr},
	"--tool-call-parser":             {"tool_call_parser", argStr},
	"--enable-auto-tool-choice":      {"enable_auto_tool_choice", argBool},
	"--reasoning-parser":             {"reasoning_parser", argStr},
	"--max-log-len":                  {"max_log_len", argInt},
}

// serveArgs is a parsed command line, with vLLM's defaults filled in.
type serveArgs struct {
	prog            string // "vllm serve" or "api_server.py", as argparse names itself
	model           string
	modelFlag       bool // the model came from --model under `vllm serve`: vLLM warns
	host            string
	downloadDir     string // where weights are downloaded instead of the HF cache
	uvicornLevel    string // warning and above silence uvicorn's INFO lines
	backend         string // --distributed-executor-backend ("ray": a Ray cluster's GPUs)
	port            int
	tp, pp          int
	maxNumSeqs      int
	maxNumSeqsSet   bool // --max-num-seqs was given
	maxModelLen     int  // 0: the model's own
	gpuUtil         float64
	served          []string
	enableLoRA      bool
	loraModules     []loraModule
	maxLoras        int
	apiKeys         []string
	accessLog       bool
	logRequests     bool
	disableLogStats bool
	nonDefault      []string // "'dest': value", in the order given, for the non-default args line
}

// loraModule is one --lora-modules entry.
type loraModule struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	BaseName string `json:"base_model_name"`
}

// argError is argparse's failure: printed after the usage line, exit code 2.
type argError struct{ prog, msg string }

func (e *argError) Error() string { return e.prog + ": error: " + e.msg }

// usage is argparse's one-line usage for the program.
func (e *argError) usage() string {
	if e.prog == "vllm serve" {
		return "usage: vllm serve [model_tag] [options]"
	}
	return "usage: api_server.py [-h] [--host HOST] [--port PORT] [options]"
}

// serveCommand reduces the container's command and args to vLLM's own argument list: the
// image's entrypoint is `vllm serve`; `vllm serve ...`, `python3 -m
// vllm.entrypoints.openai.api_server ...` and `sh -c "<one of those>"` are accepted too.
// ok is false for a command that does not start vLLM.
func serveCommand(command, args []string) (prog string, argv []string, ok bool) {
	if len(command) == 0 {
		return "vllm serve", args, true
	}
	full := append(append([]string(nil), command...), args...)
	if base(full[0]) == "sh" || base(full[0]) == "bash" {
		if len(full) >= 3 && full[1] == "-c" {
			return serveCommand(shellWords(full[2]), nil)
		}
		return "", nil, false
	}
	switch {
	case base(full[0]) == "vllm" && len(full) >= 2 && full[1] == "serve":
		return "vllm serve", full[2:], true
	case strings.HasPrefix(base(full[0]), "python") && len(full) >= 3 && full[1] == "-m" &&
		full[2] == "vllm.entrypoints.openai.api_server":
		return "api_server.py", full[3:], true
	}
	return "", nil, false
}

func base(p string) string { return p[strings.LastIndex(p, "/")+1:] }

// shellWords is the first command of a `sh -c` script: `exec` and what follows `&&`, `||` or
// `;` are as far as the fake follows a script.
func shellWords(s string) []string {
	if lists := shellLists(s); len(lists) > 0 {
		return lists[0]
	}
	return nil
}

// shellLists splits a `sh -c` script on blanks, honouring single and double quotes and
// backslashes, into its commands at each unquoted `&&`, `||` or `;`; a leading `exec` is
// dropped from each.
func shellLists(s string) [][]string {
	var lists [][]string
	var words []string
	var cur strings.Builder
	in, quote, quoted := false, byte(0), false
	endWord := func() {
		if !in && !quoted {
			return
		}
		w := cur.String()
		cur.Reset()
		if !quoted && (w == "&&" || w == "||" || w == ";") {
			lists = append(lists, words)
			words = nil
		} else {
			words = append(words, w)
		}
		in, quoted = false, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, quoted = c, true
		case c == ' ' || c == '\t' || c == '\n':
			endWord()
			continue
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] != '\n' {
				cur.WriteByte(s[i])
			}
		default:
			cur.WriteByte(c)
		}
		in = true
	}
	endWord()
	lists = append(lists, words)
	var out [][]string
	for _, l := range lists {
		if len(l) > 0 && l[0] == "exec" {
			l = l[1:]
		}
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// parseServeArgs parses argv as vLLM's parser does: `--flag value` and `--flag=value`,
// the model as positional model_tag (vllm serve only), every unknown argument reported
// at once.
func parseServeArgs(prog string, argv []string) (*serveArgs, error) {
	a := &serveArgs{prog: prog, port: 8000, tp: 1, pp: 1, maxNumSeqs: 256, gpuUtil: 0.9,
		maxLoras: 1, accessLog: true}
	var unknown []string
	fail := func(format string, args ...any) error {
		return &argError{prog: prog, msg: fmt.Sprintf(format, args...)}
	}
	for i := 0; i < len(argv); i++ {
		arg := argv[i]
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			if prog == "vllm serve" && a.model == "" && !a.modelFlag {
				a.model = arg
				// vllm serve copies model_tag into model: both keys show as non-default
				a.nonDefault = append(a.nonDefault, "'model_tag': "+pyRepr(arg), "'model': "+pyRepr(arg))
				continue
			}
			unknown = append(unknown, arg)
			continue
		}
		name, val, hasVal := strings.Cut(arg, "=")
		neg := false
		f, known := serveFlags[name]
		if !known && strings.HasPrefix(name, "--no-") {
			if g, ok := serveFlags["--"+name[len("--no-"):]]; ok && g.kind == argBool {
				f, known, neg = g, true, true
			}
		}
		if !known {
			unknown = append(unknown, arg)
			continue
		}
		var vals []string
		switch {
		case f.kind == argBool:
			if hasVal {
				return nil, fail("argument %s: ignored explicit argument %s", name, pyRepr(val))
			}
		case hasVal:
			vals = []string{val}
		case f.kind == argList:
			for i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") {
				i++
				vals = append(vals, argv[i])
			}
			if len(vals) == 0 {
				return nil, fail("argument %s: expected at least one argument", name)
			}
		default:
			if i+1 >= len(argv) || (strings.HasPrefix(argv[i+1], "-") && !isNumber(argv[i+1])) {
				return nil, fail("argument %s: expected one argument", name)
			}
			i++
			vals = []string{argv[i]}
		}
		if err := a.set(f, name, vals, !neg); err != nil {
			return nil, fail("%s", err.Error())
		}
	}
	if len(unknown) > 0 {
		return nil, fail("unrecognized arguments: %s", strings.Join(unknown, " "))
	}
	if a.model == "" {
		a.model = "Qwen/Qwen3-0.6B" // vLLM v0.11's default model
	}
	if len(a.served) == 0 {
		a.served = []string{a.model}
	}
	return a, nil
}

func isNumber(s string) bool { _, err := strconv.ParseFloat(s, 64); return err == nil }

// set stores one parsed option and records it for the non-default args line.
func (a *serveArgs) set(f serveFlag, name string, vals []string, on bool) error {
	var repr string
	switch f.kind {
	case argInt:
		n, err := strconv.Atoi(vals[0])
		if err != nil {
			return fmt.Errorf("argument %s: invalid int value: %s", name, pyRepr(vals[0]))
		}
		repr = strconv.Itoa(n)
		switch f.dest {
		case "port":
			a.port = n
		case "tensor_parallel_size":
			a.tp = n
		case "pipeline_parallel_size":
			a.pp = n
		case "max_num_seqs":
			a.maxNumSeqs, a.maxNumSeqsSet = n, true
		case "max_loras":
			a.maxLoras = n
		}
	case argFloat:
		x, err := strconv.ParseFloat(vals[0], 64)
		if err != nil {
			return fmt.Errorf("argument %s: invalid float value: %s", name, pyRepr(vals[0]))
		}
		repr = pyFloat(x)
		if f.dest == "gpu_memory_utilization" {
			a.gpuUtil = x
		}
	case argBool:
		repr = "False"
		if on {
			repr = "True"
		}
		switch f.dest {
		case "enable_lora":
			a.enableLoRA = on
		case "disable_uvicorn_access_log":
			a.accessLog = !on
		case "enable_log_requests":
			a.logRequests = on
		case "disable_log_stats":
			a.disableLogStats = on
		}
	case argList:
		var rs []string
		for _, v := range vals {
			rs = append(rs, pyRepr(v))
		}
		repr = "[" + strings.Join(rs, ", ") + "]"
		switch f.dest {
		case "served_model_name":
			a.served = append(a.served, vals...)
		case "api_key":
			a.apiKeys = append(a.apiKeys, vals...)
		case "lora_modules":
			for _, v := range vals {
				m, err := parseLoRAModule(v)
				if err != nil {
					return fmt.Errorf("argument %s: %w", name, err)
				}
				a.loraModules = append(a.loraModules, m)
			}
		}
	default:
		repr = pyRepr(vals[0])
		switch f.dest {
		case "model":
			a.model, a.modelFlag = vals[0], true
		case "host":
			a.host = vals[0]
		case "download_dir":
			a.downloadDir = vals[0]
		case "uvicorn_log_level":
			a.uvicornLevel = vals[0]
		case "distributed_executor_backend":
			a.backend = vals[0]
		case "max_model_len":
			n, ok := parseHumanInt(vals[0])
			if !ok {
				return fmt.Errorf("argument %s: invalid human_readable_int value: %s", name, pyRepr(vals[0]))
			}
			a.maxModelLen, repr = n, strconv.Itoa(n)
		}
	}
	a.nonDefault = append(a.nonDefault, "'"+f.dest+"': "+repr)
	return nil
}

// parseLoRAModule reads name=path or the JSON form vLLM accepts.
func parseLoRAModule(v string) (loraModule, error) {
	if strings.HasPrefix(strings.TrimSpace(v), "{") {
		var m loraModule
		if err := json.Unmarshal([]byte(v), &m); err != nil || m.Name == "" || m.Path == "" {
			return loraModule{}, fmt.Errorf("Invalid JSON format for --lora-modules: %s", v)
		}
		return m, nil
	}
	name, path, ok := strings.Cut(v, "=")
	if !ok || name == "" || path == "" {
		return loraModule{}, fmt.Errorf("invalid parse_type value: %s", pyRepr(v))
	}
	return loraModule{Name: name, Path: path}, nil
}

// parseHumanInt reads 4096, 32k, 1M, 1.5K as vLLM's human_readable_int does (k = 1000,
// K = 1024).
func parseHumanInt(s string) (int, bool) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "m"), strings.HasSuffix(s, "g"):
		mult = map[byte]float64{'k': 1e3, 'm': 1e6, 'g': 1e9}[s[len(s)-1]]
		s = s[:len(s)-1]
	case strings.HasSuffix(s, "K"), strings.HasSuffix(s, "M"), strings.HasSuffix(s, "G"):
		mult = map[byte]float64{'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}[s[len(s)-1]]
		s = s[:len(s)-1]
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || x <= 0 {
		return 0, false
	}
	return int(x * mult), true
}

// pyRepr is Python's repr of a str.
func pyRepr(s string) string {
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}

// pyFloat is Python's repr of a float: 0.9, 1.0, 1e-05, 1764770000.123.
func pyFloat(x float64) string {
	s := strconv.FormatFloat(x, 'f', -1, 64)
	if ax := math.Abs(x); x != 0 && (ax < 1e-4 || ax >= 1e16) {
		s = strconv.FormatFloat(x, 'e', -1, 64)
	}
	if !strings.ContainsAny(s, ".eIN") {
		s += ".0"
	}
	return s
}
