package main

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
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
	cfg := serverConfig{Weights: newWeightsCache(), TimeScale: 1}
	mounts := map[string]string{"/root/.cache/huggingface": "pvc:ns/weights"}
	// Qwen3-0.6B's 1.2 GB at 400 MB/s: 3 s, a bar line a second.
	fill := modelServerSpec{Command: []string{"hf", "download", "Qwen/Qwen3-0.6B", "--revision", "main"}, GPUs: -1, Mounts: mounts,
		Env: map[string]string{"HF_HOME": "/root/.cache/huggingface", "TQDM_MININTERVAL": "1"}, DownloadMBPerS: 400}
	s, log, _ := vtStart(t, fill, cfg)
	if st := vtExit(t, s, log); st.Code != 0 {
		t.Fatalf("fill exited %+v:\n%s", st, log.Render(logOptions{TailLines: -1}))
	}
	text := log.Render(logOptions{TailLines: -1})
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
	_, slog, url := vtStart(t, modelServerSpec{Args: []string{"Qwen/Qwen3-0.6B"}, Mounts: mounts, Env: offline}, serve)
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	if strings.Contains(slog.Render(logOptions{TailLines: -1}), "Time spent downloading weights") {
		t.Error("a server on the filled volume downloaded")
	}
	other, olog, _ := vtStart(t, modelServerSpec{Args: []string{"Qwen/Qwen3-0.6B"}, Mounts: map[string]string{"/root/.cache/huggingface": "pvc:ns/empty"}, Env: offline}, serve)
	if st := vtExit(t, other, olog); st.Code == 0 || !strings.Contains(vtLastLine(olog), "LocalEntryNotFoundError") {
		t.Errorf("offline on an empty volume: %+v %q", st, vtLastLine(olog))
	}
	// filled already: nothing fetched again
	again, alog, _ := vtStart(t, fill, cfg)
	if st := vtExit(t, again, alog); st.Code != 0 || byteBar.MatchString(alog.Render(logOptions{TailLines: -1})) {
		t.Errorf("a second fill downloaded: %+v\n%s", st, alog.Render(logOptions{TailLines: -1}))
	}
}

// A fill stopped half way leaves its partial blobs: the next one fetches only the rest.
func TestHFDownloadResumes(t *testing.T) {
	t.Parallel()
	cfg := serverConfig{Weights: newWeightsCache(), TimeScale: 1}
	fill := modelServerSpec{Command: []string{"hf", "download", "Qwen/Qwen3-0.6B"}, GPUs: -1, DownloadMBPerS: 400,
		Mounts: map[string]string{"/root/.cache/huggingface": "pvc:ns/resume"}, Env: map[string]string{"TQDM_MININTERVAL": "1"}}
	s, log, _ := vtStart(t, fill, cfg)
	vtEventually(t, "a first bar line", func() (bool, string) {
		return byteBar.MatchString(log.Render(logOptions{TailLines: -1})), vtLastLine(log)
	})
	s.Stop()
	vtEventually(t, "the stopped fill's partial blobs kept", func() (bool, string) {
		return cfg.Weights.resumeFrom("pvc:ns/resume", "Qwen/Qwen3-0.6B") > 0, ""
	})
	again, alog, _ := vtStart(t, fill, cfg)
	if st := vtExit(t, again, alog); st.Code != 0 {
		t.Fatalf("resumed fill: %+v", st)
	}
	m := byteBar.FindStringSubmatch(alog.Render(logOptions{TailLines: -1}))
	if m == nil || m[1] == "0" {
		t.Fatalf("the resumed fill started from zero:\n%s", alog.Render(logOptions{TailLines: -1}))
	}
	if !cfg.Weights.has("pvc:ns/resume", "Qwen/Qwen3-0.6B") || cfg.Weights.resumeFrom("pvc:ns/resume", "Qwen/Qwen3-0.6B") != 0 {
		t.Error("the resumed fill did not complete the volume")
	}
}
