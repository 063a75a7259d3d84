package vllm

import (
	"testing"
	"time"
)

// Lines as huggingface_hub's snapshot_download prints them with TQDM_POSITION=-1: each
// refresh on its own line, the cursor moved back up after it.
const fillLog = "Downloading (incomplete total...): 0.00B [00:00, ?B/s]\x1b[A\n" +
	"\rFetching 5 files:   0%|          | 0/5 [00:00<?, ?it/s]\x1b[A\n" +
	"\rDownloading (incomplete total...):   1%|▏         | 83.9M/16.2G [00:02<06:16, 42.7MB/s]\x1b[A\n" +
	"\rDownloading (incomplete total...):  38%|███▊      | 6.20G/16.4G [00:30<00:48, 210MB/s]\x1b[A\n" +
	"\rFetching 5 files:  20%|██        | 1/5 [00:31<02:04, 31.1s/it]\x1b[A\n"

func TestParseDownloadProgress(t *testing.T) {
	p, ok := ParseDownloadProgress(fillLog)
	if !ok || p.Bytes != 6_200_000_000 || p.Total != 16_400_000_000 || p.Rate != 210e6 || p.Left != 48*time.Second {
		t.Fatalf("%+v %v", p, ok)
	}
	if got, want := p.Message("Qwen/Qwen3-8B"), "downloading Qwen/Qwen3-8B: 6.2 GB of 16.4 GB (37%), 210.0 MB/s, about 48s left"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	p, ok = ParseDownloadProgress("Downloading (incomplete total...): 1.41M [00:00, 5.33MB/s]\r")
	if !ok || p.Bytes != 1_410_000 || p.Total != 0 || p.Left != -1 {
		t.Errorf("without a total: %+v %v", p, ok)
	}
	if _, ok := ParseDownloadProgress("Fetching 5 files:   0%|          | 0/5 [00:00<?, ?it/s]\n"); ok {
		t.Error("a file count read as bytes")
	}
	if _, ok := ParseDownloadProgress(""); ok {
		t.Error("progress from an empty log")
	}
	// huggingface_hub 0.3x (vllm/vllm-openai:v0.11.0's): a bar per file, no total, then the
	// fill's own line, which is what is read.
	fill := "fill: Qwen/Qwen3-8B@main: 9 files in *.safetensors, 16400000000 bytes\n" +
		"model-00002-of-00004.safetensors:  38%|███▊      | 1.90G/4.98G [00:10<00:16, 190MB/s]\n" +
		"fill: Qwen/Qwen3-8B 6200000000/16400000000 bytes, 200000000 bytes/s\n" +
		"model-00003-of-00004.safetensors:   2%|▏         | 99.6M/4.98G [00:00<00:25, 190MB/s]\n"
	p, ok = ParseDownloadProgress(fill)
	if !ok || p.Bytes != 6_200_000_000 || p.Total != 16_400_000_000 || p.Rate != 200e6 || p.Left != 51*time.Second {
		t.Errorf("the fill's line: %+v %v", p, ok)
	}
	if _, ok := ParseDownloadProgress("model-00002-of-00004.safetensors:  38%|███▊      | 1.90G/4.98G [00:10<00:16, 190MB/s]\n"); ok {
		t.Error("one file's bar read as the download's")
	}
}

// The fill fetches the model's hf:// adapters too (the offline pods find them in the cache),
// and the pods get a writable HF_MODULES_CACHE beside the read-only claim.
