// A managed cache's fill in vLLM's image: the script that downloads what vLLM would, and the
// reader of its progress from its log.

package vllm

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// FillScript is the fill: `python3 -c fillScript MODEL REVISION [ADAPTER...]`, on
// huggingface_hub's snapshot_download, which every vLLM image ships (`hf download` only from
// huggingface_hub 0.34). It fetches what vLLM's download_weights_from_hf would: the first of
// FILL_WEIGHT_FORMATS the repo's top level has (DefaultModelLoader's order for load_format
// auto), never original/ (vLLM's ignore_patterns), and the small files the server reads beside
// them (config, tokenizer, chat template, remote code); then each hf:// adapter, which the
// offline pods' get_adapter_absolute_path finds in the same cache. Before a byte is fetched
// it sums the listing's sizes against the volume and exits 3 (no retry) when they do not fit.
// Its own progress line counts the blobs on the volume every TQDM_MININTERVAL, as 0.3x's
// per-file bars give no total.
const FillScript = `import fnmatch, os, shutil, sys, threading, time
from huggingface_hub import HfApi, snapshot_download
from huggingface_hub.constants import HF_HUB_CACHE
model, revision, adapters = sys.argv[1], sys.argv[2], sys.argv[3:]
env = lambda k: os.environ.get(k, "").split()
api = HfApi()
files = api.model_info(model, revision=revision, files_metadata=True).siblings
top = [f.rfilename for f in files if "/" not in f.rfilename]
fmt = next((p for p in env("FILL_WEIGHT_FORMATS") if fnmatch.filter(top, p)), "")
allow = ([fmt] if fmt else []) + env("FILL_ALSO")
ignore = env("FILL_IGNORE")
def wanted(n):
    return any(fnmatch.fnmatch(n, p) for p in allow) and not any(fnmatch.fnmatch(n, p) for p in ignore)
need = sum(f.size or 0 for f in files if wanted(f.rfilename))
need += sum(f.size or 0 for a in adapters for f in api.model_info(a, files_metadata=True).siblings)
room = shutil.disk_usage(os.environ["HF_HOME"]).total
if need > room:
    print(f"fill: {model}@{revision} needs {need} bytes ({fmt} and its adapters), more than the volume's {room} bytes", flush=True)
    sys.exit(3)
print(f"fill: {model}@{revision}: {sum(wanted(f.rfilename) for f in files)} files in {fmt}, {need} bytes", flush=True)
every = float(os.environ.get("TQDM_MININTERVAL", "5"))
def watch(repo, total):
    blobs = os.path.join(HF_HUB_CACHE, "models--" + repo.replace("/", "--"), "blobs")
    last, t = 0, time.time()
    while True:
        time.sleep(every)
        n = sum(e.stat().st_size for e in os.scandir(blobs)) if os.path.isdir(blobs) else 0
        now = time.time()
        print(f"fill: {repo} {n}/{total} bytes, {max(0, n - last) / (now - t):.0f} bytes/s", flush=True)
        last, t = n, now
threading.Thread(target=watch, args=(model, need), daemon=True).start()
snapshot_download(model, revision=revision, allow_patterns=allow, ignore_patterns=ignore)
for a in adapters:
    snapshot_download(a)
print(f"fill: {model} {need}/{need} bytes, 0 bytes/s", flush=True)
`

// Fill's patterns: vLLM v0.11's DefaultModelLoader asks download_weights_from_hf for
// ["*.safetensors", "*.bin"] (load_format auto) plus "*.pt" (fall_back_to_pt) and ignores
// ModelConfig's default ["original/**/*"]; config and tokenizer files come through
// transformers' own downloads, remote code as *.py.
const (
	FillWeightFormats = "*.safetensors *.bin *.pt"
	FillAlso          = "*.json *.txt *.model *.tiktoken *.jinja *.py"
	FillIgnore        = "original/**/*"
	// FillTooSmall is FillScript's exit code when the weights do not fit the volume: the Job
	// fails at once (its podFailurePolicy), since a retry cannot fit them either.
	FillTooSmall = 3
)

// progressLine is a tqdm bar with unit "B" and unit_scale, as snapshot_download prints it:
// "Downloading (incomplete total...):  38%|███▊      | 6.20G/16.4G [00:30<00:48, 210MB/s]",
// or without a total yet "Downloading (incomplete total...): 1.41M [00:00, 5.33MB/s]".
var progressLine = regexp.MustCompile(`(?:(\d+)%\|[^|]*\|\s*)?([0-9.]+[kMGTPEZY]?)(?:B)?(?:/([0-9.]+[kMGTPEZY]?)B?)?\s+\[([0-9:]+)(?:<([0-9:?]+))?,\s*([0-9.?]+[kMGTPEZY]?)B/s\]`)

// fillLine is fillScript's progress: "fill: Qwen/Qwen3-8B 6200000000/16400000000 bytes,
// 210000000 bytes/s", the bytes of the repo's blobs on the volume.
var fillLine = regexp.MustCompile(`^fill: \S+ (\d+)/(\d+) bytes, (\d+) bytes/s`)

// ParseDownloadProgress reads the last progress line of a fill pod's log: fillScript's own,
// or huggingface_hub 1.x's aggregate byte bar (a fill run by hand with `hf download` on a
// newer image). Lines end in "\n" or tqdm's "\r" redraws, with terminal escapes around them.
// 0.3x's per-file byte bars and the "Fetching N files" bar carry no total of the bytes and
// are skipped.
func ParseDownloadProgress(log string) (engine.Progress, bool) {
	lines := strings.FieldsFunc(log, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if m := fillLine.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			p := engine.Progress{Left: -1}
			p.Bytes, _ = strconv.ParseInt(m[1], 10, 64)
			p.Total, _ = strconv.ParseInt(m[2], 10, 64)
			p.Rate, _ = strconv.ParseFloat(m[3], 64)
			if p.Rate > 0 && p.Total >= p.Bytes {
				p.Left = time.Duration(float64(p.Total-p.Bytes) / p.Rate * float64(time.Second)).Round(time.Second)
			}
			return p, true
		}
		if !strings.Contains(l, "Downloading") && !strings.Contains(l, "Download complete") {
			continue
		}
		m := progressLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		p := engine.Progress{Bytes: scaled(m[2]), Total: scaled(m[3]), Left: -1}
		if m[6] != "?" {
			p.Rate = float64(scaled(m[6]))
		}
		if d, ok := clock(m[5]); ok {
			p.Left = d
		}
		return p, true
	}
	return engine.Progress{}, false
}

// scaled reads tqdm's unit_scale figure (SI prefixes, divisor 1000); 0 for "".
func scaled(s string) int64 {
	if s == "" {
		return 0
	}
	mult := 1.0
	if i := strings.IndexAny(s, "kMGTPEZY"); i >= 0 {
		mult = math.Pow(1000, float64(strings.IndexByte("kMGTPEZY", s[i])+1))
		s = s[:i]
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return int64(math.Round(f * mult))
}

// clock reads tqdm's [hh:]mm:ss.
func clock(s string) (time.Duration, bool) {
	if s == "" || strings.Contains(s, "?") {
		return 0, false
	}
	var d time.Duration
	for _, part := range strings.Split(s, ":") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return 0, false
		}
		d = d*60 + time.Duration(n)
	}
	return d * time.Second, true
}
