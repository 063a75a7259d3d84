package argparse

import (
	"strings"
	"testing"
)

// parser is the same parser as this script under CPython (3.11.7 here; 3.12's texts for these
// cases are the same), whose output the cases below hold:
//
//	p = argparse.ArgumentParser(prog="launch_server.py")
//	p.add_argument("--model-path", "--model", type=str, required=True)
//	p.add_argument("--tokenizer-path", type=str)
//	p.add_argument("--tokenizer-mode", type=str, choices=["auto", "slow"])
//	p.add_argument("--tensor-parallel-size", "--tp-size", type=int)
//	p.add_argument("--enable-lora", action="store_true")
//	p.add_argument("--max-lora-rank", type=int)
//	p.add_argument("--lora-target-modules", type=str, nargs="*", choices=["q_proj", "all"])
//	p.add_argument("--lora-paths", type=str, nargs="*")
//	p.add_argument("--max-loras-per-batch", type=int)
//	p.add_argument("--max-loaded-loras", type=int)
//	p.add_argument("--bucket", type=float, nargs="+")
//	p.add_argument("--dtype", type=str, choices=["auto", "half"])
func parser() *Parser {
	return New("launch_server.py", []Option{
		{Flags: []string{"--model-path", "--model"}, Dest: "model_path", Required: true},
		{Flags: []string{"--tokenizer-path"}, Dest: "tokenizer_path"},
		{Flags: []string{"--tokenizer-mode"}, Dest: "tokenizer_mode", Choices: []string{"auto", "slow"}},
		{Flags: []string{"--tensor-parallel-size", "--tp-size"}, Dest: "tensor_parallel_size", Type: Int},
		{Flags: []string{"--enable-lora"}, Dest: "enable_lora", Action: StoreTrue},
		{Flags: []string{"--max-lora-rank"}, Dest: "max_lora_rank", Type: Int},
		{Flags: []string{"--lora-target-modules"}, Dest: "lora_target_modules", Nargs: '*', Choices: []string{"q_proj", "all"}},
		{Flags: []string{"--lora-paths"}, Dest: "lora_paths", Nargs: '*'},
		{Flags: []string{"--max-loras-per-batch"}, Dest: "max_loras_per_batch", Type: Int},
		{Flags: []string{"--max-loaded-loras"}, Dest: "max_loaded_loras", Type: Int},
		{Flags: []string{"--bucket"}, Dest: "bucket", Type: Float, Nargs: '+'},
		{Flags: []string{"--dtype"}, Dest: "dtype", Choices: []string{"auto", "half"}},
	})
}

const usage = `usage: launch_server.py [-h] --model-path MODEL_PATH
                        [--tokenizer-path TOKENIZER_PATH]
                        [--tokenizer-mode {auto,slow}]
                        [--tensor-parallel-size TENSOR_PARALLEL_SIZE]
                        [--enable-lora] [--max-lora-rank MAX_LORA_RANK]
                        [--lora-target-modules [{q_proj,all} ...]]
                        [--lora-paths [LORA_PATHS ...]]
                        [--max-loras-per-batch MAX_LORAS_PER_BATCH]
                        [--max-loaded-loras MAX_LOADED_LORAS]
                        [--bucket BUCKET [BUCKET ...]] [--dtype {auto,half}]`

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "m", "--foo"}, "unrecognized arguments: --foo"},
		{[]string{"--model", "m", "--max-lo", "3"}, "ambiguous option: --max-lo could match --max-lora-rank, --max-loras-per-batch, --max-loaded-loras"},
		{[]string{"--model", "m", "--tp", "x"}, "argument --tensor-parallel-size/--tp-size: invalid int value: 'x'"},
		{[]string{"--model", "m", "--dtype", "fp4"}, "argument --dtype: invalid choice: 'fp4' (choose from 'auto', 'half')"},
		{[]string{"--tp", "2"}, "the following arguments are required: --model-path/--model"},
		{[]string{"--model", "m", "--enable-lora=yes"}, "argument --enable-lora: ignored explicit argument 'yes'"},
		{[]string{"--model", "m", "--lora-target-modules", "x"}, "argument --lora-target-modules: invalid choice: 'x' (choose from 'q_proj', 'all')"},
		{[]string{"--model", "m", "--max-lo=3"}, "ambiguous option: --max-lo=3 could match --max-lora-rank, --max-loras-per-batch, --max-loaded-loras"},
		{[]string{"--model", "m", "--bucket"}, "argument --bucket: expected at least one argument"},
	} {
		_, err := parser().Parse(tc.args)
		e, ok := err.(*Error)
		if !ok || e.Msg != tc.want || e.Usage != usage || e.Error() != "launch_server.py: error: "+tc.want {
			t.Errorf("%v: %v", tc.args, err)
		}
	}
}

func TestAccepted(t *testing.T) {
	ns, err := parser().Parse([]string{"--model=m", "--tp", "2", "--enable-lora", "--lora-target-modules", "all", "q_proj",
		"--lora-paths", "--bucket", "0.5", "1e1", "--max-loras", "4"})
	if err != nil {
		t.Fatal(err)
	}
	if ns["model_path"] != "m" || ns["tensor_parallel_size"] != 2 || ns["enable_lora"] != true || len(ns["lora_target_modules"].([]any)) != 2 ||
		len(ns["lora_paths"].([]any)) != 0 || ns["bucket"].([]any)[1] != 10.0 || ns["max_loras_per_batch"] != 4 {
		t.Fatalf("%v", ns)
	}
	if _, err := parser().Parse([]string{"--model", "m", "-h"}); err == nil || !strings.HasPrefix(err.Error(), "usage: launch_server.py [-h]") {
		t.Fatalf("-h: %v", err)
	}
	for s, want := range map[string]int{" 7 ": 7, "+3": 3, "1_000": 1000, "-2": -2} {
		if n, ok := PyInt(s); !ok || n != want {
			t.Errorf("PyInt(%q) = %d %v", s, n, ok)
		}
	}
	for _, s := range []string{"", "1.5", "_1", "1__0", "0x10"} {
		if _, ok := PyInt(s); ok {
			t.Errorf("PyInt(%q) took it", s)
		}
	}
}
