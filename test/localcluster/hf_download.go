// huggingface_hub's `hf download REPO [--revision REV]` in a vLLM image (which ships the CLI):
// it fetches the repo into HF_HOME's volume at the modelled link speed, printing
// snapshot_download's byte bar as huggingface_hub does with TQDM_POSITION=-1 (each refresh
// on a line of its own, no terminal needed), then the snapshot's path, and exits 0. What the
// volume already holds is not fetched again, and a server on that volume then starts without
// a download (weightsCache). A PersistentVolume annotated kubelet.fake/download-mb-per-s is
// behind a slow link: every download through it, the CLI's or vLLM's, runs at that speed.

package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// downloadSpeedAnnotation on a PersistentVolume is the megabytes per second downloads onto it
// are fetched at, in place of the kubelet's --vllm-download-mb-per-s.
const downloadSpeedAnnotation = "kubelet.fake/download-mb-per-s"

// hfDownload is one `hf download` command line.
type hfDownload struct {
	repo, revision string
}

// parseHFDownload reads `hf download REPO [--revision REV]` (also `huggingface-cli download`);
// ok is false for any other program.
func parseHFDownload(command, args []string) (hfDownload, bool) {
	full := append(append([]string(nil), command...), args...)
	if len(full) < 3 || (base(full[0]) != "hf" && base(full[0]) != "huggingface-cli") || full[1] != "download" {
		return hfDownload{}, false
	}
	d := hfDownload{revision: "main"}
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

// runHFDownload is the CLI's process.
func (s *modelServer) runHFDownload(d hfDownload) {
	sp := s.spec
	if gatedModel(d.repo) && sp.Env["HF_TOKEN"] == "" {
		s.log.Printf("Traceback (most recent call last):")
		s.log.Printf(`  File "%s/huggingface_hub/utils/_http.py", line 426, in hf_raise_for_status`, pyLib)
		s.log.Printf("huggingface_hub.errors.GatedRepoError: 401 Client Error.")
		s.log.Printf("Cannot access gated repo for url https://huggingface.co/api/models/%s/revision/%s.", d.repo, d.revision)
		s.log.Printf("Access to model %s is restricted. You must have access to it and be authenticated to access it. Please log in.", d.repo)
		s.exit(exitStatus{Code: 1, Reason: "Error"})
		return
	}
	home := sp.Env["HF_HOME"]
	if home == "" {
		home = "/root/.cache/huggingface"
	}
	_, volume, _ := mountFor(sp.Mounts, home)
	snapshot := home + "/hub/models--" + strings.ReplaceAll(d.repo, "/", "--") + "/snapshots/" + fakeCommit(d.repo, d.revision)
	total := weightBytes(d.repo)
	files := shards(total) + 4 // the shards, their index, config, tokenizer and generation config
	if s.cfg.Weights.has(volume, d.repo) {
		s.log.Printf("Fetching %d files: 100%%|██████████| %d/%d [00:00<00:00, %.2fit/s]", files, files, files, float64(files)*50)
		s.log.Printf("%s", snapshot)
		s.exit(exitStatus{Code: 0, Reason: "Completed"})
		return
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
	s.log.Printf("Downloading (incomplete total...): 0.00B [00:00, ?B/s]\x1b[A")
	s.log.Printf("\rFetching %d files:   0%%|          | 0/%d [00:00<?, ?it/s]\x1b[A", files, files)
	// A retry resumes the .incomplete blobs an interrupted run left: only the rest is fetched.
	resumed := s.cfg.Weights.resumeFrom(volume, d.repo)
	took = time.Duration(float64(took) * float64(total-resumed) / float64(max(total, 1)))
	start := time.Now()
	at := func() int64 {
		return resumed + int64(float64(total-resumed)*float64(min(time.Since(start), took))/float64(max(took, 1)))
	}
	for {
		elapsed := time.Since(start)
		if elapsed >= took {
			break
		}
		if !s.wait(min(every, took-elapsed)) {
			s.cfg.Weights.interrupted(volume, d.repo, at()) // stopped: the blobs stay .incomplete
			return
		}
		elapsed = min(time.Since(start), took)
		done := at()
		modelled := elapsed.Seconds() / s.cfg.TimeScale
		left := took.Seconds()/s.cfg.TimeScale - modelled
		s.log.Printf("\rDownloading (incomplete total...): %3d%%|%s| %s/%s [%s<%s, %sB/s]\x1b[A",
			done*100/max(total, 1), bar(done, total), tqdmSize(float64(done)), tqdmSize(float64(total)), tqdmClock(modelled), tqdmClock(left), tqdmSize(bw))
	}
	s.cfg.Weights.put(volume, d.repo)
	s.log.Printf("\rFetching %d files: 100%%|██████████| %d/%d [%s<00:00, %.2fit/s]", files, files, files, tqdmClock(took.Seconds()/s.cfg.TimeScale), float64(files)/math.Max(took.Seconds()/s.cfg.TimeScale, 1e-3))
	s.log.Printf("Download complete: : %s [%s, %sB/s]", tqdmSize(float64(total)), tqdmClock(took.Seconds()/s.cfg.TimeScale), tqdmSize(bw))
	s.log.Printf("%s", snapshot)
	s.exit(exitStatus{Code: 0, Reason: "Completed"})
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
	n := int(done * 10 / max(total, 1))
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

// downloadSpeed is the link speed the pod's volumes impose (downloadSpeedAnnotation on a
// claim's volume), 0 for the kubelet's own.
func (ps *podState) downloadSpeed(ctx context.Context) float64 {
	for _, vol := range ps.pod.Spec.Volumes {
		if vol.PersistentVolumeClaim == nil {
			continue
		}
		pvc, err := ps.k.client.CoreV1().PersistentVolumeClaims(ps.pod.Namespace).Get(ctx, vol.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
		if err != nil || pvc.Spec.VolumeName == "" {
			continue
		}
		pv, err := ps.k.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			continue
		}
		if v, err := strconv.ParseFloat(pv.Annotations[downloadSpeedAnnotation], 64); err == nil && v > 0 {
			return v
		}
	}
	return 0
}
