package vllm

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// TestParseServeArgsRefuses: what vLLM v0.11.0's parser refuses, with argparse's text (CPython
// 3.12: choices printed with str()) and the program that reports it: the serve subparser, or
// its parent `vllm` for arguments the subparser left over.
func TestParseServeArgsRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"m", "--foo", "1", "--bar"}, "vllm: error: unrecognized arguments: --foo 1 --bar"},
		{"unknown flag before the model", []string{"--foo", "m"}, "vllm: error: unrecognized arguments: --foo"},
		{"second positional", []string{"m", "n"}, "vllm: error: unrecognized arguments: n"},
		{"value glued to a multi-letter short option", []string{"m", "-tp2"}, "vllm: error: unrecognized arguments: -tp2"},
		{"ambiguous abbreviation", []string{"m", "--max-lora", "3"},
			"vllm serve: error: ambiguous option: --max-lora could match --max-loras, --max-lora-rank"},
		{"ambiguous abbreviation with =", []string{"m", "--max-lora=3"},
			"vllm serve: error: ambiguous option: --max-lora=3 could match --max-loras, --max-lora-rank"},
		{"ambiguous short abbreviation", []string{"m", "-d", "2"},
			"vllm serve: error: ambiguous option: -d could match -dcp, -dp, -dpn, -dpr, -dpl, -dpa, -dpp, -dpb"},
		{"ambiguous with --help", []string{"m", "--he"}, "vllm serve: error: ambiguous option: --he could match --help, --headless"},
		{"ambiguity before a bad value", []string{"m", "--port", "x", "--max-lora", "3"},
			"vllm serve: error: ambiguous option: --max-lora could match --max-loras, --max-lora-rank"},
		{"value given to a boolean", []string{"m", "--enable-lora=1"},
			"vllm serve: error: argument --enable-lora/--no-enable-lora: ignored explicit argument '1'"},
		{"value given to store_true", []string{"m", "--headless=yes"}, "vllm serve: error: argument --headless: ignored explicit argument 'yes'"},
		{"bad int", []string{"m", "--max-num-seqs", "x"}, "vllm serve: error: argument --max-num-seqs: invalid int value: 'x'"},
		{"bad int through an abbreviation", []string{"m", "--max-num-s", "2.5"}, "vllm serve: error: argument --max-num-seqs: invalid int value: '2.5'"},
		{"bad int of a short option", []string{"m", "-tp", "two"}, "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'two'"},
		{"bad optional int", []string{"m", "--seed", "x"}, "vllm serve: error: argument --seed: Value x cannot be converted to <class 'int'>."},
		{"bad float", []string{"m", "--gpu-memory-utilization", "x"}, "vllm serve: error: argument --gpu-memory-utilization: invalid float value: 'x'"},
		{"bad optional float", []string{"m", "--rope-theta", "x"}, "vllm serve: error: argument --rope-theta: Value x cannot be converted to <class 'float'>."},
		{"bad choice", []string{"m", "--dtype", "fp64"},
			"vllm serve: error: argument --dtype: invalid choice: 'fp64' (choose from auto, bfloat16, float, float16, float32, half)"},
		{"bad int choice", []string{"m", "--block-size", "5"},
			"vllm serve: error: argument --block-size: invalid choice: '5' (choose from 1, 8, 16, 32, 64, 128)"},
		{"max-lora-rank not one of vLLM's", []string{"m", "--max-lora-rank", "24"},
			"vllm serve: error: argument --max-lora-rank: invalid choice: '24' (choose from 1, 8, 16, 32, 64, 128, 256, 320, 512)"},
		{"None is no choice", []string{"m", "--task", "None"},
			"vllm serve: error: argument --task: invalid choice: 'None' (choose from auto, classify, draft, embed, embedding, generate, reward, score, transcription, None)"},
		{"bad reasoning parser", []string{"m", "--reasoning-parser", "r1"},
			"vllm serve: error: argument --reasoning-parser: invalid choice: 'r1' (choose from deepseek_r1, glm45, openai_gptoss, granite, hunyuan_a13b, mistral, qwen3, seed_oss, step3)"},
		{"bad human int", []string{"m", "--max-model-len", "32q"}, "vllm serve: error: argument --max-model-len: invalid human_readable_int value: '32q'"},
		{"decimal with a binary suffix", []string{"m", "--max-model-len", "1.5K"},
			"vllm serve: error: argument --max-model-len: Decimals are not allowed with binary suffixes like K. Did you mean to use 1.5k instead?"},
		{"bad optional human int", []string{"m", "--kv-cache-memory-bytes", "x"},
			"vllm serve: error: argument --kv-cache-memory-bytes: Value x cannot be converted to " + humanIntFunc + "."},
		{"missing value", []string{"m", "--port"}, "vllm serve: error: argument --port: expected one argument"},
		{"option for a value", []string{"m", "--port", "--host", "h"}, "vllm serve: error: argument --port: expected one argument"},
		{"missing list", []string{"m", "--served-model-name"}, "vllm serve: error: argument --served-model-name: expected at least one argument"},
		{"bad JSON", []string{"m", "--speculative-config", "{bad"},
			"vllm serve: error: argument --speculative-config: Value {bad cannot be converted to " + loadsFunc + "."},
		{"bad JSON dict", []string{"m", "--override-generation-config", "temperature=0.5"},
			"vllm serve: error: argument --override-generation-config: Value temperature=0.5 cannot be converted to " + loadsFunc + "."},
		{"bad JSON in braces", []string{"m", "--hf-overrides", "{bad}"},
			"vllm serve: error: argument --hf-overrides: Value {bad} cannot be converted to " + loadsFunc + "."},
		{"bad JSON list", []string{"m", "--allowed-origins", "*"}, "vllm serve: error: argument --allowed-origins: invalid loads value: '*'"},
		{"bad JSON config", []string{"m", "--compilation-config", "x"},
			"vllm serve: error: argument --compilation-config/-O: 1 validation error for CompilationConfig\n" +
				"  Invalid JSON: expected value at line 1 column 1 [type=json_invalid, input_value='x', input_type=str]\n" +
				"    For further information visit https://errors.pydantic.dev/2.11/v/json_invalid"},
		{"truncated JSON config", []string{"m", "--compilation-config", `{"level":1,`},
			"vllm serve: error: argument --compilation-config/-O: 1 validation error for CompilationConfig\n" +
				`  Invalid JSON: EOF while parsing a value at line 1 column 11 [type=json_invalid, input_value='{"level":1,', input_type=str]` + "\n" +
				"    For further information visit https://errors.pydantic.dev/2.11/v/json_invalid"},
		{"-O with a level that is no int", []string{"m", "-Ox"},
			"vllm serve: error: argument --compilation-config/-O: 1 validation error for CompilationConfig\nlevel\n" +
				"  Input should be a valid integer, unable to parse string as an integer [type=int_parsing, input_value='x', input_type=str]\n" +
				"    For further information visit https://errors.pydantic.dev/2.11/v/int_parsing"},
		{"JSON config not an object", []string{"m", "--kv-transfer-config", "[1]"},
			"vllm serve: error: argument --kv-transfer-config: 1 validation error for KVTransferConfig\n" +
				"  Input should be an object [type=dataclass_type, input_value=[1], input_type=list]\n" +
				"    For further information visit https://errors.pydantic.dev/2.11/v/dataclass_type"},
		{"bad LoRA JSON", []string{"m", "--lora-modules", "{bad"}, "vllm serve: error: Invalid JSON format for --lora-modules: {bad"},
		{"LoRA JSON without a path", []string{"m", "--lora-modules", `{"name":"a"}`},
			`vllm serve: error: Invalid fields for --lora-modules: {"name":"a"} - LoRAModulePath.__init__() missing 1 required positional argument: 'path'`},
		{"LoRA JSON not an object", []string{"m", "--lora-modules", "[1]"},
			"vllm serve: error: Invalid fields for --lora-modules: [1] - vllm.entrypoints.openai.serving_models.LoRAModulePath() argument after ** must be a mapping, not list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := parseServeArgs("vllm serve", tc.args)
			var ae *argError
			if !errors.As(err, &ae) || err.Error() != tc.want {
				t.Fatalf("parse %q: %+v, %v; want %q", tc.args, a, err, tc.want)
			}
			want := "usage: vllm serve [model_tag] [options]"
			if ae.prog == "vllm" {
				want = "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."
			}
			if ae.usage() != want {
				t.Fatalf("usage %q, want %q", ae.usage(), want)
			}
		})
	}
}

// TestParseServeArgsAccepts: the spellings vLLM accepts and what they set, checked through the
// fields the fake serves from and vLLM's non-default args line.
func TestParseServeArgsAccepts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		check      func(*serveArgs) bool
		nonDefault string
	}{
		{name: "underscores", args: []string{"m", "--tensor_parallel_size", "2", "--max_num_seqs=8"},
			check:      func(a *serveArgs) bool { return a.tp == 2 && a.maxNumSeqs == 8 && a.maxNumSeqsSet },
			nonDefault: "'model_tag': 'm', 'model': 'm', 'tensor_parallel_size': 2, 'max_num_seqs': 8"},
		{name: "unique abbreviation", args: []string{"m", "--tensor-par", "2", "--gpu-mem", "0.5", "--served", "x"},
			check: func(a *serveArgs) bool { return a.tp == 2 && a.gpuUtil == 0.5 && strings.Join(a.served, ",") == "x" }},
		{name: "short abbreviation", args: []string{"m", "-t", "4"}, check: func(a *serveArgs) bool { return a.tp == 4 }},
		{name: "value glued to a one-letter option", args: []string{"m", "-qawq"},
			nonDefault: "'model_tag': 'm', 'model': 'm', 'quantization': 'awq'"},
		{name: "equals", args: []string{"m", "--port=9000", "-tp=2", "--served-model-name=a"},
			check: func(a *serveArgs) bool { return a.port == 9000 && a.tp == 2 && strings.Join(a.served, ",") == "a" }},
		{name: "the parser's order, not the command line's", args: []string{"m", "-tp", "2", "--port", "9000"},
			nonDefault: "'model_tag': 'm', 'port': 9000, 'model': 'm', 'tensor_parallel_size': 2"},
		{name: "defaults given are not non-default", args: []string{"m", "--port", "8000", "--swap-space", "4", "--disable-log-requests"},
			nonDefault: "'model_tag': 'm', 'model': 'm'"},
		{name: "boolean and its --no form", args: []string{"m", "--enable-lora", "--no-enable-lora", "--no-disable-uvicorn-access-log"},
			check:      func(a *serveArgs) bool { return !a.enableLoRA && a.accessLog },
			nonDefault: "'model_tag': 'm', 'model': 'm', 'enable_lora': False"},
		{name: "--no form abbreviated", args: []string{"m", "--no-enable-prefix"},
			nonDefault: "'model_tag': 'm', 'model': 'm', 'enable_prefix_caching': False"},
		{name: "access log off", args: []string{"m", "--disable-uvicorn-access-log", "--enable-log-requests", "--disable-log-stats"},
			check: func(a *serveArgs) bool { return !a.accessLog && a.logRequests && a.disableLogStats }},
		{name: "list options: the last occurrence wins", args: []string{"m", "--served-model-name", "a", "b", "--api-key", "k1", "--api-key", "k2"},
			check: func(a *serveArgs) bool {
				return strings.Join(a.served, ",") == "a,b" && strings.Join(a.apiKeys, ",") == "k2"
			}},
		{name: "JSON", args: []string{"m", "--hf-overrides", `{"rope_theta": 1e6, "a": [1, true, null]}`},
			nonDefault: "'model_tag': 'm', 'model': 'm', 'hf_overrides': {'rope_theta': 1000000.0, 'a': [1, True, None]}"},
		{name: "not JSON, so a string", args: []string{"m", "--hf-overrides", "{bad"},
			nonDefault: "'model_tag': 'm', 'model': 'm', 'hf_overrides': '{bad'"},
		{name: "dotted JSON keys, appended after the rest", args: []string{"--hf-overrides.a.b", "1", "m", "--hf_overrides.c=x", "--speculative-config.method", "ngram"},
			nonDefault: "'model_tag': 'm', 'model': 'm', 'hf_overrides': {'a': {'b': 1}, 'c': 'x'}, 'speculative_config': {'method': 'ngram'}"},
		{name: "dotted list", args: []string{"m", "--compilation-config.cudagraph_capture_sizes+", "1,2", "--compilation-config.level", "3"},
			nonDefault: "'model_tag': 'm', 'model': 'm', 'compilation_config': {'cudagraph_capture_sizes': ['1', '2'], 'level': 3}"},
		{name: "-O3", args: []string{"m", "-O3"}, nonDefault: "'model_tag': 'm', 'model': 'm', 'compilation_config': {'level': 3}"},
		{name: "-O 2", args: []string{"m", "-O", "2"}, nonDefault: "'model_tag': 'm', 'model': 'm', 'compilation_config': {'level': 2}"},
		{name: "human-readable ints", args: []string{"m", "--max-model-len", "32k", "--max-num-batched-tokens", "2K"},
			check:      func(a *serveArgs) bool { return a.maxModelLen == 32000 },
			nonDefault: "'model_tag': 'm', 'model': 'm', 'max_model_len': 32000, 'max_num_batched_tokens': 2048"},
		{name: "Python's int and float", args: []string{"m", "--port", " 9_000 ", "--gpu-memory-utilization", "5e-1"},
			check: func(a *serveArgs) bool { return a.port == 9000 && a.gpuUtil == 0.5 }},
		{name: "negative number as a value", args: []string{"m", "--seed", "-1"}, nonDefault: "'model_tag': 'm', 'model': 'm', 'seed': -1"},
		{name: "--hf-token without a value", args: []string{"m", "--hf-token"}, nonDefault: "'model_tag': 'm', 'model': 'm', 'hf_token': True"},
		{name: "LoRA modules", args: []string{"m", "--enable-lora", "--lora-modules", "x=/l/x", `{"name":"y","path":"org/y","base_model_name":"b"}`},
			check: func(a *serveArgs) bool {
				return a.enableLoRA && len(a.loraModules) == 2 && a.loraModules[0].Path == "/l/x" && a.loraModules[1].BaseName == "b"
			},
			nonDefault: "'model_tag': 'm', 'lora_modules': [LoRAModulePath(name='x', path='/l/x', base_model_name=None), LoRAModulePath(name='y', path='org/y', base_model_name='b')], 'model': 'm', 'enable_lora': True"},
		{name: "model after the options", args: []string{"--port", "9000", "my/model"},
			check: func(a *serveArgs) bool { return a.model == "my/model" && a.port == 9000 }},
		{name: "model after --", args: []string{"--port", "9000", "--", "-model-"},
			check: func(a *serveArgs) bool { return a.model == "-model-" }},
		{name: "the operator's single-node arguments", args: []string{"Qwen/Qwen3-8B", "--port", "8000", "--served-model-name", "Qwen/Qwen3-8B",
			"--tensor-parallel-size", "2", "--enable-lora", "--max-cpu-loras", "8"},
			check: func(a *serveArgs) bool { return a.tp == 2 && a.enableLoRA && a.served[0] == "Qwen/Qwen3-8B" }},
		{name: "the operator's multi-node arguments", args: []string{"Qwen/Qwen3-8B", "--port", "8000", "--served-model-name", "qwen",
			"--tensor-parallel-size", "8", "--pipeline-parallel-size", "2", "--distributed-executor-backend", "ray"},
			check: func(a *serveArgs) bool { return a.tp == 8 && a.pp == 2 && a.backend == "ray" }},
		{name: "serve's own options", args: []string{"m", "--headless", "--api-server-count", "2", "--data-parallel-start-rank", "1", "-dp", "2"},
			nonDefault: "'model_tag': 'm', 'headless': True, 'api_server_count': 2, 'model': 'm', 'data_parallel_size': 2, 'data_parallel_start_rank': 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := parseServeArgs("vllm serve", tc.args)
			if err != nil {
				t.Fatalf("parse %q: %v", tc.args, err)
			}
			if tc.check != nil && !tc.check(a) {
				t.Fatalf("parse %q: %+v", tc.args, a)
			}
			if got := strings.Join(a.nonDefault, ", "); tc.nonDefault != "" && got != tc.nonDefault {
				t.Fatalf("non-default args of %q:\n {%s}\nwant\n {%s}", tc.args, got, tc.nonDefault)
			}
		})
	}
}

// TestParseServeArgsOtherErrors: what vLLM refuses outside argparse, and -h.
func TestParseServeArgsOtherErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"m", "--config"}, "ValueError: No config file specified!"},
		{[]string{"m", "--config", "c.json"}, "ValueError: ('Config file must be of a yaml/yml type."},
		{[]string{"m", "--hf-overrides.a"}, "IndexError: list index out of range"},
		{[]string{"m", "--lora-modules", "a=b=c"}, "ValueError: too many values to unpack (expected 2)"},
	} {
		_, err := parseServeArgs("vllm serve", tc.args)
		var pe *pyError
		if !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("parse %q: %v, want a Python %q", tc.args, err, tc.want)
		}
	}
	if _, err := parseServeArgs("vllm serve", []string{"m", "--config", "c.yaml"}); err != nil {
		t.Errorf("a YAML config file: %v", err)
	}
	var help *helpRequest
	if _, err := parseServeArgs("vllm serve", []string{"m", "--port", "1", "-h"}); !errors.As(err, &help) {
		t.Errorf("-h: %v, want the help", err)
	}
}

// TestParseServeArgsAPIServer: the api_server module's parser is one parser named after its
// file, with the same positional model_tag, which it does not serve.
func TestParseServeArgsAPIServer(t *testing.T) {
	a, err := parseServeArgs("api_server.py", []string{"tag", "--model", "m"})
	if err != nil || a.model != "m" || strings.Join(a.nonDefault, ", ") != "'model_tag': 'tag', 'model': 'm'" {
		t.Fatalf("%+v, %v", a, err)
	}
	_, err = parseServeArgs("api_server.py", []string{"serve", "/models/m"})
	if err == nil || err.Error() != "api_server.py: error: unrecognized arguments: /models/m" {
		t.Fatalf("err = %v", err)
	}
}

// TestServeFlagTable: the table is vLLM v0.11.0's: its size, unique option strings, a --no-x
// for each BooleanOptionalAction, and options added and removed around v0.11.0.
func TestServeFlagTable(t *testing.T) {
	opts := serveOptions()
	seen := map[string]bool{}
	n := 0
	for _, o := range opts {
		for _, f := range o.flags {
			if seen[f] {
				t.Errorf("%s twice", f)
			}
			seen[f] = true
			n++
		}
		if o.action == actBoolOpt && (len(o.flags) != 2 || o.flags[1] != "--no-"+o.flags[0][2:]) {
			t.Errorf("%v: a BooleanOptionalAction is --x and --no-x", o.flags)
		}
	}
	if len(opts) != 184 || n != 243 {
		t.Errorf("%d options with %d option strings (-h/--help included), want vLLM v0.11.0's 184 and 243", len(opts), n)
	}
	for _, f := range []string{"--trust-request-chat-template", "--allowed-media-domains", "--video-pruning-rate", "-dcp", "--api-server-count", "-asc",
		"--headless", "--config", "-O", "-q", "--no-enable-lora", "--max-cpu-loras"} {
		if !seen[f] {
			t.Errorf("v0.11.0 has %s", f)
		}
	}
	for _, f := range []string{"--max-seq-len-to-capture", "--preemption-mode", "--disable-async-output-proc", "--enable-prompt-adapter", "--device", "--grpc"} {
		if seen[f] {
			t.Errorf("v0.11.0 has no %s", f)
		}
	}
}

// TestParseJSONErrors: malformed JSON positioned and worded as pydantic's parser does.
func TestParseJSONErrors(t *testing.T) {
	for in, want := range map[string]string{
		"":              "EOF while parsing a value at line 1 column 0",
		"{":             "EOF while parsing an object at line 1 column 1",
		`{"a"`:          "EOF while parsing an object at line 1 column 4",
		`{"a":1,}`:      "trailing comma at line 1 column 8",
		`{a:1}`:         "key must be a string at line 1 column 2",
		`{"a" 1}`:       "expected `:` at line 1 column 6",
		`{"a":1 "b":2}`: "expected `,` or `}` at line 1 column 8",
		"[1 2]":         "expected `,` or `]` at line 1 column 4",
		`"abc`:          "EOF while parsing a string at line 1 column 4",
		`{"a":1}x`:      "trailing characters at line 1 column 8",
		"01":            "invalid number at line 1 column 2",
		"trux":          "expected ident at line 1 column 4",
		`{"a":"\q"}`:    "invalid escape at line 1 column 8",
		"\n\nx":         "expected value at line 3 column 1",
		"\"ab\ncd\"":    `control character (\u0000-\u001F) found while parsing a string at line 2 column 0`,
		`{"a": [1, 2}`:  "expected `,` or `]` at line 1 column 12",
		"[1,":           "EOF while parsing a value at line 1 column 3",
		"-x":            "invalid number at line 1 column 2",
		"1e+":           "EOF while parsing a value at line 1 column 3",
	} {
		_, err := parseJSON(in)
		if err == nil {
			t.Errorf("%q parsed", in)
			continue
		}
		line, col := err.position(in)
		if got := fmt.Sprintf("%s at line %d column %d", err.msg, line, col); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}

// A container without a command runs its image's entrypoint: v0.11.0 and before the api_server
// module, later vllm serve.
func TestImageEntrypoint(t *testing.T) {
	for image, want := range map[string]string{
		"vllm/vllm-openai:v0.11.0":        "python3 -m vllm.entrypoints.openai.api_server",
		"vllm/vllm-openai:v0.10.2":        "python3 -m vllm.entrypoints.openai.api_server",
		"docker.io/vllm/vllm-openai:v0.9": "python3 -m vllm.entrypoints.openai.api_server",
		"vllm/vllm-openai:v0.11.1":        "vllm serve",
		"vllm/vllm-openai:v0.12.0":        "vllm serve",
		"vllm/vllm-openai:latest":         "vllm serve",
		"registry:5000/vllm-openai":       "vllm serve",
		"kubelet.fake/vllm:v0.11.0":       "vllm serve",
	} {
		if got := strings.Join(imageEntrypoint(image), " "); got != want {
			t.Errorf("%s: %q, want %q", image, got, want)
		}
	}
}

// The v0.11.0 image given the model positionally, as `vllm serve` takes it: the api_server
// reads it as model_tag, ignores it and serves its default model under the given name.
func TestAPIServerIgnoresPositionalModel(t *testing.T) {
	_, log, url := vtStart(t, proc.Spec{Image: "vllm/vllm-openai:v0.11.0",
		Args: []string{"Qwen/Qwen3-8B", "--served-model-name", "Qwen/Qwen3-8B"}}, Config{})
	body := vtWaitStatus(t, "GET", url+"/v1/models", "", 200)
	if !strings.Contains(body, `"id":"Qwen/Qwen3-8B"`) || !strings.Contains(body, `"root":"Qwen/Qwen3-0.6B"`) {
		t.Fatalf("/v1/models %s, want Qwen/Qwen3-0.6B served as Qwen/Qwen3-8B\n%s", body, log.Render(proc.LogOptions{TailLines: 20}))
	}
	_, _, url = vtStart(t, proc.Spec{Image: "vllm/vllm-openai:v0.11.0", Command: []string{"vllm", "serve"},
		Args: []string{"Qwen/Qwen3-8B", "--served-model-name", "Qwen/Qwen3-8B"}}, Config{})
	if body := vtWaitStatus(t, "GET", url+"/v1/models", "", 200); !strings.Contains(body, `"root":"Qwen/Qwen3-8B"`) {
		t.Fatalf("vllm serve: /v1/models %s", body)
	}
}
