package vllm

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// byteBar is huggingface_hub 0.3x's per-file bar (http_get's tqdm, unit B, unit_scale), as the
// default image's hub prints it, e.g.
// "model.safetensors:  38%|███▊      | 456M/1.20G [00:02<00:03, 200MB/s]".
var byteBar = regexp.MustCompile(`model[-0-9of]*\.safetensors:\s+(\d+)%\|[^|]*\| [0-9.]+[kMGT]?/[0-9.]+[kMGT]? \[\d\d:\d\d<\d\d:\d\d, [0-9.]+[kMGT]?B/s\]`)

func TestParseHFDownload(t *testing.T) {
	for _, tc := range []struct {
		cmd  []string
		want hfDownload
		ok   bool
	}{
		{[]string{"hf", "download", "Qwen/Qwen3-8B", "--revision", "v2"}, hfDownload{repo: "Qwen/Qwen3-8B", revision: "v2", cli: "hf"}, true},
		{[]string{"/usr/local/bin/hf", "download", "--revision=abc", "Qwen/Qwen3-8B"}, hfDownload{repo: "Qwen/Qwen3-8B", revision: "abc", cli: "hf"}, true},
		{[]string{"huggingface-cli", "download", "gpt2"}, hfDownload{repo: "gpt2", revision: "main", cli: "huggingface-cli"}, true},
		{[]string{"python3", "-c", "from huggingface_hub import snapshot_download", "gpt2", "main", "org/a-lora"}, hfDownload{repo: "gpt2", revision: "main", fill: true, adapters: []string{"org/a-lora"}}, true},
		{[]string{"hf", "upload", "gpt2"}, hfDownload{}, false},
		{[]string{"vllm", "serve", "gpt2"}, hfDownload{}, false},
	} {
		got, ok := parseHFDownload(tc.cmd, nil)
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: %+v %v", tc.cmd, got, ok)
		}
	}
}

// A fill prints its byte bar moving, exits 0, and a server on the filled volume then starts
// offline without downloading; one on another volume, offline, fails as huggingface_hub does.
func TestHFDownloadFillsTheVolume(t *testing.T) {
	t.Parallel()
	cfg := Config{Weights: hfmodel.NewWeightsCache(), TimeScale: 1}
	mounts := map[string]string{"/root/.cache/huggingface": "pvc:ns/weights"}
	// Qwen3-0.6B's 1.2 GB at 400 MB/s: 3 s, a bar line a second.
	fill := proc.Spec{Command: []string{"hf", "download", "Qwen/Qwen3-0.6B", "--revision", "main"}, GPUs: -1, Mounts: mounts,
		Env: map[string]string{"HF_HOME": "/root/.cache/huggingface", "TQDM_MININTERVAL": "1"}, DownloadMBPerS: 400}
	s, log, _ := vtStart(t, fill, cfg)
	if st := vtExit(t, s, log); st.Code != 0 {
		t.Fatalf("fill exited %+v:\n%s", st, log.Render(proc.LogOptions{TailLines: -1}))
	}
	text := log.Render(proc.LogOptions{TailLines: -1})
	var pct []string
	for _, m := range byteBar.FindAllStringSubmatch(text, -1) {
		pct = append(pct, m[1])
	}
	if len(pct) < 2 || pct[0] == pct[len(pct)-1] {
		t.Fatalf("byte bar not moving (%v):\n%q", pct, text)
	}
	if !strings.Contains(vtLastLine(log), "/hub/models--Qwen--Qwen3-0.6B/snapshots/") {
		t.Errorf("last line %q: the snapshot's path", vtLastLine(log))
	}
	offline := map[string]string{"HF_HUB_OFFLINE": "1"}
	// The servers start at the suite's usual scale: at 1, a start's modelled torch.compile and
	// graph capture alone take 50 s. The weights cache is the fill's.
	serve := cfg
	serve.TimeScale = 0.01
	_, slog, url := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B"}, Mounts: mounts, Env: offline}, serve)
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	if strings.Contains(slog.Render(proc.LogOptions{TailLines: -1}), "Time spent downloading weights") {
		t.Error("a server on the filled volume downloaded")
	}
	other, olog, _ := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B"}, Mounts: map[string]string{"/root/.cache/huggingface": "pvc:ns/empty"}, Env: offline}, serve)
	if st := vtExit(t, other, olog); st.Code == 0 || !strings.Contains(vtLastLine(olog), "LocalEntryNotFoundError") {
		t.Errorf("offline on an empty volume: %+v %q", st, vtLastLine(olog))
	}
	// filled already: nothing fetched again
	again, alog, _ := vtStart(t, fill, cfg)
	if st := vtExit(t, again, alog); st.Code != 0 || byteBar.MatchString(alog.Render(proc.LogOptions{TailLines: -1})) {
		t.Errorf("a second fill downloaded: %+v\n%s", st, alog.Render(proc.LogOptions{TailLines: -1}))
	}
}

// A fill stopped half way leaves its partial blobs: the next one fetches only the rest.
func TestHFDownloadResumes(t *testing.T) {
	t.Parallel()
	cfg := Config{Weights: hfmodel.NewWeightsCache(), TimeScale: 1}
	fill := proc.Spec{Command: []string{"hf", "download", "Qwen/Qwen3-0.6B"}, GPUs: -1, DownloadMBPerS: 400,
		Mounts: map[string]string{"/root/.cache/huggingface": "pvc:ns/resume"}, Env: map[string]string{"TQDM_MININTERVAL": "1"}}
	s, log, _ := vtStart(t, fill, cfg)
	vtEventually(t, "a first bar line", func() (bool, string) {
		return byteBar.MatchString(log.Render(proc.LogOptions{TailLines: -1})), vtLastLine(log)
	})
	s.Stop()
	vtEventually(t, "the stopped fill's partial blobs kept", func() (bool, string) {
		return cfg.Weights.ResumeFrom("pvc:ns/resume", "Qwen/Qwen3-0.6B") > 0, ""
	})
	again, alog, _ := vtStart(t, fill, cfg)
	if st := vtExit(t, again, alog); st.Code != 0 {
		t.Fatalf("resumed fill: %+v", st)
	}
	m := byteBar.FindStringSubmatch(alog.Render(proc.LogOptions{TailLines: -1}))
	if m == nil || m[1] == "0" {
		t.Fatalf("the resumed fill started from zero:\n%s", alog.Render(proc.LogOptions{TailLines: -1}))
	}
	if !cfg.Weights.Has("pvc:ns/resume", "Qwen/Qwen3-0.6B") || cfg.Weights.ResumeFrom("pvc:ns/resume", "Qwen/Qwen3-0.6B") != 0 {
		t.Error("the resumed fill did not complete the volume")
	}
}

// The hub as each image's huggingface_hub reaches it: `hf` is missing before 0.34 (v0.9's
// images), the fill picks vLLM's first format of a repo carrying four, and a volume's
// capacity is enforced: the CLI's whole-repo download runs out of space, the fill's one
// format fits, and a volume too small for even that is named before any byte.
func TestHubAsTheImageShipsIt(t *testing.T) {
	t.Parallel()
	cfg := Config{Weights: hfmodel.NewWeightsCache(), TimeScale: 0.01}
	home := map[string]string{"HF_HOME": "/root/.cache/huggingface", "TQDM_MININTERVAL": "1",
		"FILL_WEIGHT_FORMATS": "*.safetensors *.bin *.pt", "FILL_ALSO": "*.json *.txt *.model *.tiktoken *.jinja *.py", "FILL_IGNORE": "original/**/*"}
	run := func(spec proc.Spec) (proc.Exit, string) {
		t.Helper()
		spec.GPUs, spec.Env = -1, home
		s, log, _ := vtStart(t, spec, cfg)
		st := vtExit(t, s, log)
		return st, log.Render(proc.LogOptions{TailLines: -1})
	}
	if st, log := run(proc.Spec{Image: "vllm/vllm-openai:v0.9.2", Command: []string{"hf", "download", "gpt2"},
		Mounts: map[string]string{"/root/.cache/huggingface": "pvc:ns/a"}}); st.Reason != "StartError" || !strings.Contains(log, `exec: "hf": executable file not found in $PATH`) {
		t.Errorf("hf on v0.9.2: %+v\n%s", st, log)
	}
	// gpt2: 248 MB a format, four of them; 600 MB of volume
	st, log := run(proc.Spec{Image: "vllm/vllm-openai:v0.11.0", Command: []string{"hf", "download", "gpt2"},
		Mounts: map[string]string{"/root/.cache/huggingface": "pvc:ns/b"}, VolumeBytes: 600e6})
	if st.Code != 1 || !strings.Contains(log, "OSError: [Errno 28] No space left on device") {
		t.Errorf("the whole repo on 600 MB: %+v\n%s", st, log)
	}
	fill := []string{"python3", "-c", "from huggingface_hub import snapshot_download", "gpt2", "main", "org/sql-lora"}
	st, log = run(proc.Spec{Image: "vllm/vllm-openai:v0.9.2", Command: fill, Mounts: map[string]string{"/root/.cache/huggingface": "pvc:ns/c"}, VolumeBytes: 600e6})
	if st.Code != 0 || !strings.Contains(log, "files in *.safetensors") || !cfg.Weights.Has("pvc:ns/c", "gpt2") || !cfg.Weights.Has("pvc:ns/c", "org/sql-lora") {
		t.Errorf("the fill on 600 MB: %+v\n%s", st, log)
	}
	st, log = run(proc.Spec{Command: fill, Mounts: map[string]string{"/root/.cache/huggingface": "pvc:ns/d"}, VolumeBytes: 100e6})
	if st.Code != 3 || !strings.Contains(log, "more than the volume's 100000000 bytes") || strings.Contains(log, ".safetensors:") {
		t.Errorf("the fill on 100 MB: %+v\n%s", st, log)
	}
}

// A cached model's server runs offline: an hf:// adapter loads only when the fill put it in
// the cache, and a --trust-remote-code model needs HF_MODULES_CACHE off the read-only claim.
func TestOfflineAdaptersAndRemoteCode(t *testing.T) {
	t.Parallel()
	cfg := Config{Weights: hfmodel.NewWeightsCache(), TimeScale: 0.01}
	mounts := map[string]string{"/root/.cache/huggingface": "pvc:ns/w", "/var/cache/hf-modules": "emptyDir:x/m"}
	cfg.Weights.Put("pvc:ns/w", "Qwen/Qwen3-0.6B")
	cfg.Weights.Put("pvc:ns/w", "org/cached-lora")
	cfg.Weights.Put("pvc:ns/w", "org/tiny-1B-custom-code")
	env := map[string]string{"HF_HUB_OFFLINE": "1", "HF_HOME": "/root/.cache/huggingface", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
	s, _, url := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B", "--enable-lora"}, Mounts: mounts, Env: env,
		ReadOnly: map[string]bool{"/root/.cache/huggingface": true}}, cfg)
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	if msg, _, code := s.addLoRA("cached", "org/cached-lora", ""); code != 0 {
		t.Errorf("a cached adapter: %d %s", code, msg)
	}
	if msg, _, code := s.addLoRA("other", "org/other-lora", ""); code != 404 || !strings.Contains(msg, "No adapter found for org/other-lora") {
		t.Errorf("an uncached adapter offline: %d %s", code, msg)
	}
	code := proc.Spec{Args: []string{"org/tiny-1B-custom-code", "--trust-remote-code"}, Mounts: mounts, Env: env,
		ReadOnly: map[string]bool{"/root/.cache/huggingface": true}}
	c, clog, _ := vtStart(t, code, cfg)
	if st := vtExit(t, c, clog); st.Code != 1 || !strings.Contains(vtLastLine(clog), "OSError: [Errno 30] Read-only file system: '/root/.cache/huggingface/modules'") {
		t.Errorf("remote code on the read-only cache: %+v %q", st, vtLastLine(clog))
	}
	code.Env = map[string]string{"HF_MODULES_CACHE": "/var/cache/hf-modules"}
	for k, v := range env {
		code.Env[k] = v
	}
	_, _, curl := vtStart(t, code, cfg)
	vtWaitStatus(t, "GET", curl+"/health", "", 200)
}
