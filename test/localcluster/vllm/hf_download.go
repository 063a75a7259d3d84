// The Hugging Face Hub as a vLLM image's own huggingface_hub reaches it: the repos' file
// listings (hub.go's hubFiles: duplicate weight formats as real repos carry them), `hf download
// REPO` (from huggingface_hub 0.34; an older image has no `hf` and the runtime cannot start
// it), and the operator's fill, `python3 -c` over snapshot_download, which every vLLM image
// has. Both print what the image's hub version prints: 0.3x's per-file tqdm bars (unit B,
// unit_scale, one line each refresh with TQDM_POSITION=-1), never 1.x's aggregate byte bar.
// A volume holds what its PersistentVolume's capacity holds: past it a write fails with
// ENOSPC, in Python's words. A PersistentVolume annotated kubelet.fake/download-mb-per-s is
// behind a slow link: every download through it, the CLI's, the fill's or vLLM's, runs at that
// speed. What the volume already holds is not fetched again, and a server on it then starts
// without a download (hfmodel.WeightsCache).

package vllm

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// hfDownload is one `hf download` command line, or one fill (`python3 -c` over
// snapshot_download, its repos in argv and its patterns in its environment).
type hfDownload struct {
	repo, revision string
	// fill: the operator's snapshot_download script, not the CLI.
	fill     bool
	adapters []string
	cli      string // the program: hf or huggingface-cli
}

// parseHFDownload reads `hf download REPO [--revision REV]` (also `huggingface-cli download`)
// and `python3 -c SCRIPT REPO REVISION [ADAPTER...]` where SCRIPT calls snapshot_download;
// ok is false for any other program.
func parseHFDownload(command, args []string) (hfDownload, bool) {
	full := append(append([]string(nil), command...), args...)
	if len(full) >= 5 && strings.HasPrefix(base(full[0]), "python") && full[1] == "-c" && strings.Contains(full[2], "snapshot_download") {
		return hfDownload{repo: full[3], revision: full[4], fill: true, adapters: full[5:]}, true
	}
	if len(full) < 3 || (base(full[0]) != "hf" && base(full[0]) != "huggingface-cli") || full[1] != "download" {
		return hfDownload{}, false
	}
	d := hfDownload{revision: "main", cli: base(full[0])}
	for i := 2; i < len(full); i++ {
		switch a := full[i]; {
		case a == "--revision" && i+1 < len(full):
			d.revision = full[i+1]
			i++
		case strings.HasPrefix(a, "--revision="):
			d.revision = strings.TrimPrefix(a, "--revision=")
		case !strings.HasPrefix(a, "-") && d.repo == "":
			d.repo = a
		}
	}
	return d, d.repo != ""
}

// hubVersion is the huggingface_hub an image ships, as its vLLM release's pins resolved when
// the image was built: transformers 4.56/4.57 (v0.11) require huggingface-hub<1.0, and `hf`
// came with 0.34 (July 2025), after v0.9's images. Images the fake cannot date (other
// repositories, latest, kubelet.fake/) ship the default image's.
func hubVersion(image string) (major, minor int) {
	ref := image
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	var tag string
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	var ma, mi int
	if n, _ := fmt.Sscanf(strings.TrimPrefix(tag, "v"), "%d.%d", &ma, &mi); n == 2 && strings.Contains(ref, "vllm") && ma == 0 {
		switch {
		case mi <= 9:
			return 0, 33
		case mi == 10:
			return 0, 34
		}
	}
	return 0, 35
}

// runHFDownload is the CLI's or the fill's process.
func (s *Server) runHFDownload(d hfDownload) {
	sp := s.spec
	if _, mi := hubVersion(sp.Image); d.cli == "hf" && mi < 34 {
		// the runtime's StartError: no such executable in the image
		s.log.Printf(`failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "hf": executable file not found in $PATH: unknown`)
		s.life.Exit(proc.Exit{Code: 128, Reason: "StartError"})
		return
	}
	if hfmodel.Gated(d.repo) && sp.Env["HF_TOKEN"] == "" {
		s.log.Printf("Traceback (most recent call last):")
		s.log.Printf(`  File "%s/huggingface_hub/utils/_http.py", line 409, in hf_raise_for_status`, pyLib)
		s.log.Printf("huggingface_hub.errors.GatedRepoError: 401 Client Error.")
		s.log.Printf("Cannot access gated repo for url https://huggingface.co/api/models/%s/revision/%s.", d.repo, d.revision)
		s.log.Printf("Access to model %s is restricted. You must have access to it and be authenticated to access it. Please log in.", d.repo)
		s.life.Exit(proc.Exit{Code: 1, Reason: "Error"})
		return
	}
	home := sp.Env["HF_HOME"]
	if home == "" {
		home = "/root/.cache/huggingface"
	}
	_, volume, _ := hfmodel.MountFor(sp.Mounts, home)
	files := hubFiles(d.repo)
	if d.fill {
		var ok bool
		if files, ok = s.fillPlan(d, files); !ok {
			return
		}
	}
	if !s.fetch(d.repo, d.revision, volume, files, d.fill) {
		return
	}
	for _, a := range d.adapters {
		if !s.fetch(a, "main", volume, hubFiles(a), d.fill) {
			return
		}
	}
	if !d.fill {
		s.log.Printf("%s", home+"/hub/models--"+strings.ReplaceAll(d.repo, "/", "--")+"/snapshots/"+fakeCommit(d.repo, d.revision))
	}
	s.life.Exit(proc.Exit{Code: 0, Reason: "Completed"})
}

// fillPlan is what the fill script decides before it downloads: vLLM's first weight format
// the repo has at its top level (FILL_WEIGHT_FORMATS, in order), the small files the server
// reads beside (FILL_ALSO), less FILL_IGNORE; and whether they fit the volume (its capacity,
// from the hub's listing), refused with exit 3 when not.
func (s *Server) fillPlan(d hfDownload, listing []hubFile) ([]hubFile, bool) {
	sp := s.spec
	formats, also, ignore := strings.Fields(sp.Env["FILL_WEIGHT_FORMATS"]), strings.Fields(sp.Env["FILL_ALSO"]), strings.Fields(sp.Env["FILL_IGNORE"])
	var format string
	for _, p := range formats {
		for _, f := range listing {
			if !strings.Contains(f.name, "/") && fnmatch(p, f.name) {
				format = p
				break
			}
		}
		if format != "" {
			break
		}
	}
	var want []hubFile
	var need int64
	for _, f := range listing {
		match := format != "" && fnmatch(format, f.name)
		for _, p := range also {
			match = match || fnmatch(p, f.name)
		}
		for _, p := range ignore {
			match = match && !fnmatch(p, f.name)
		}
		if match {
			want = append(want, f)
			need += f.size
		}
	}
	for _, a := range d.adapters {
		for _, f := range hubFiles(a) {
			need += f.size
		}
	}
	if c := sp.VolumeBytes; c > 0 && need > c {
		s.log.Printf("fill: %s@%s needs %d bytes (%s and its adapters), more than the volume's %d bytes", d.repo, d.revision, need, format, c)
		s.life.Exit(proc.Exit{Code: 3, Reason: "Error"})
		return nil, false
	}
	s.log.Printf("fill: %s@%s: %d files in %s, %d bytes", d.repo, d.revision, len(want), format, need)
	return want, true
}

// fetch downloads files of repo onto volume as 0.3x's snapshot_download does: the Fetching bar,
// a byte bar per file, ENOSPC past the volume's capacity; fill also prints the fill's own line
// (the bytes of the repo's blobs on the volume) each TQDM_MININTERVAL. false: it ended.
func (s *Server) fetch(repo, revision, volume string, files []hubFile, fill bool) bool {
	sp := s.spec
	var total int64
	for _, f := range files {
		total += f.size
	}
	n := len(files)
	if s.cfg.Weights.Has(volume, repo) {
		s.log.Printf("Fetching %d files: 100%%|██████████| %d/%d [00:00<00:00, %.2fit/s]", n, n, n, float64(n)*50)
		return true
	}
	bw := s.cfg.DownloadBandwidth
	if sp.DownloadMBPerS > 0 {
		bw = sp.DownloadMBPerS * 1e6
	}
	took := s.cfg.scaled(total, bw)
	if s.cfg.DownloadTime > 0 && sp.DownloadMBPerS == 0 {
		took = s.cfg.DownloadTime
	}
	// One bar line per TQDM_MININTERVAL of modelled time, at most one per test second.
	every := time.Duration(float64(time.Second) * s.cfg.TimeScale * 5)
	if v, err := strconv.ParseFloat(sp.Env["TQDM_MININTERVAL"], 64); err == nil && v > 0 {
		every = time.Duration(v * s.cfg.TimeScale * float64(time.Second))
	}
	every = max(every, time.Second)
	s.log.Printf("Fetching %d files:   0%%|          | 0/%d [00:00<?, ?it/s]", n, n)
	// A retry resumes the .incomplete blobs an interrupted run left: only the rest is fetched.
	resumed := min(s.cfg.Weights.ResumeFrom(volume, repo), total)
	took = time.Duration(float64(took) * float64(total-resumed) / float64(max(total, 1)))
	others := s.cfg.Weights.UsedBy(volume, repo)
	start := time.Now()
	at := func() int64 {
		return resumed + int64(float64(total-resumed)*float64(min(time.Since(start), took))/float64(max(took, 1)))
	}
	for {
		elapsed := time.Since(start)
		done := at()
		if c := sp.VolumeBytes; c > 0 && others+done > c {
			s.cfg.Weights.Interrupted(volume, repo, c-others)
			s.enospc(repo, revision, files, c-others)
			return false
		}
		if elapsed >= took {
			break
		}
		if !s.life.Wait(min(every, took-elapsed)) {
			s.cfg.Weights.Interrupted(volume, repo, at()) // stopped: the blobs stay .incomplete
			return false
		}
		elapsed = min(time.Since(start), took)
		done = min(at(), func() int64 {
			if c := sp.VolumeBytes; c > 0 {
				return c - others
			}
			return total
		}())
		f, fdone := fileAt(files, done)
		modelled := elapsed.Seconds() / s.cfg.TimeScale
		left := float64(f.size-fdone) / bw
		s.log.Printf("%s: %3d%%|%s| %s/%s [%s<%s, %sB/s]", f.name,
			fdone*100/max(f.size, 1), bar(fdone, f.size), tqdmSize(float64(fdone)), tqdmSize(float64(f.size)), tqdmClock(modelled), tqdmClock(left), tqdmSize(bw))
		if fill {
			s.log.Printf("fill: %s %d/%d bytes, %.0f bytes/s", repo, done, total, bw)
		}
	}
	s.cfg.Weights.Store(volume, repo, total)
	secs := took.Seconds() / s.cfg.TimeScale
	s.log.Printf("Fetching %d files: 100%%|██████████| %d/%d [%s<00:00, %.2fit/s]", n, n, n, tqdmClock(secs), float64(n)/math.Max(secs, 1e-3))
	if fill {
		s.log.Printf("fill: %s %d/%d bytes, %.0f bytes/s", repo, total, total, bw)
	}
	return true
}

// fileAt is the file being written when done bytes of files are, and its bytes so far.
func fileAt(files []hubFile, done int64) (hubFile, int64) {
	for _, f := range files {
		if done < f.size {
			return f, done
		}
		done -= f.size
	}
	if len(files) == 0 {
		return hubFile{}, 0
	}
	return files[len(files)-1], files[len(files)-1].size
}

// enospc is a write past the volume's end, as huggingface_hub's http_get reports it.
func (s *Server) enospc(repo, revision string, files []hubFile, done int64) {
	f, _ := fileAt(files, done)
	s.log.Printf("Traceback (most recent call last):")
	s.log.Printf(`  File "%s/huggingface_hub/file_download.py", line 469, in http_get`, pyLib)
	s.log.Printf("    temp_file.write(chunk)")
	s.log.Printf("OSError: [Errno 28] No space left on device: '/root/.cache/huggingface/hub/models--%s/blobs/%s.incomplete'",
		strings.ReplaceAll(repo, "/", "--"), fakeCommit(repo+"/"+f.name, revision))
	s.life.Exit(proc.Exit{Code: 1, Reason: "Error"})
}

// fakeCommit is a stable 40-hex commit for a repo at a revision.
func fakeCommit(repo, revision string) string {
	h := uint64(14695981039346656037)
	for _, c := range []byte(repo + "@" + revision) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return fmt.Sprintf("%016x%016x%08x", h, h*31, uint32(h>>7))
}

// bar is tqdm's ten-cell bar.
func bar(done, total int64) string {
	n := int(min(done*10/max(total, 1), 10))
	return strings.Repeat("█", n) + strings.Repeat(" ", 10-n)
}

// tqdmSize is tqdm's format_sizeof: three significant figures, SI prefixes by 1000.
func tqdmSize(n float64) string {
	for _, unit := range []string{"", "k", "M", "G", "T", "P"} {
		if math.Abs(n) < 999.5 {
			switch {
			case math.Abs(n) < 99.95:
				if math.Abs(n) < 9.995 {
					return fmt.Sprintf("%1.2f%s", n, unit)
				}
				return fmt.Sprintf("%2.1f%s", n, unit)
			}
			return fmt.Sprintf("%3.0f%s", n, unit)
		}
		n /= 1000
	}
	return fmt.Sprintf("%3.1fE", n)
}

// tqdmClock is tqdm's format_interval: [h:]mm:ss.
func tqdmClock(sec float64) string {
	t := int(math.Max(0, sec))
	h, m, s := t/3600, t/60%60, t%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%02d:%02d", m, s)
}
