package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeProc lays out a /proc of processes by pid: each an exe link and a status and stat file.
func fakeProc(t *testing.T, exes map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, exe := range exes {
		dir := filepath.Join(root, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(exe, filepath.Join(dir, "exe")); err != nil {
			t.Fatal(err)
		}
	}
	// Not a process.
	if err := os.MkdirAll(filepath.Join(root, "sys"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestFindOne(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "inferenceservice-activator")
	if err := os.WriteFile(bin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "localcluster")
	root := fakeProc(t, map[string]string{"10": other, "42": bin})
	if pid, err := FindOne(root, bin); err != nil || pid != 42 {
		t.Errorf("FindOne = %d, %v; want 42", pid, err)
	}
	// Two replicas: which one is measured would be a guess.
	root = fakeProc(t, map[string]string{"42": bin, "43": bin})
	if _, err := FindOne(root, bin); err == nil || !strings.Contains(err.Error(), "2 processes") {
		t.Errorf("two processes: %v", err)
	}
	root = fakeProc(t, map[string]string{"10": other})
	if _, err := FindOne(root, bin); err == nil {
		t.Error("found a process that is not running")
	}
}

func TestProcFigures(t *testing.T) {
	root := fakeProc(t, map[string]string{"7": "/bin/true"})
	status := "Name:\tactivator\nVmPeak:\t  900000 kB\nVmRSS:\t   40960 kB\nRssAnon:\t   30000 kB\n"
	// The command holds a space and a parenthesis; utime 250 and stime 50 ticks.
	stat := "7 (act (x) y) S 1 7 7 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0\n"
	for name, body := range map[string]string{"status": status, "stat": stat} {
		if err := os.WriteFile(filepath.Join(root, "7", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := Status(root, 7, "VmRSS:"); err != nil || b != 40960*1024 {
		t.Errorf("VmRSS = %d, %v", b, err)
	}
	if _, err := Status(root, 7, "VmSwap:"); err == nil {
		t.Error("a missing field read")
	}
	if s, err := CPUSeconds(root, 7); err != nil || s != 3 {
		t.Errorf("cpu = %v, %v; want 3", s, err)
	}
}

func TestSums(t *testing.T) {
	root := fakeProc(t, map[string]string{"7": "/bin/true", "8": "/bin/true"})
	for pid, rss := range map[string]string{"7": "1024", "8": "2048"} {
		status := "Name:\tepp\nVmRSS:\t" + rss + " kB\n"
		stat := pid + " (epp) S 1 7 7 0 -1 4194560 100 0 0 0 100 100 0 0 20 0 12 0 100 0 0\n"
		for name, body := range map[string]string{"status": status, "stat": stat} {
			if err := os.WriteFile(filepath.Join(root, pid, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 9 is gone: it counts nothing.
	if got := SumRSSMiB(root, []int{7, 8, 9}); got != 3 {
		t.Errorf("RSS %v MiB, want 3", got)
	}
	if got := SumCPUSeconds(root, []int{7, 8, 9}); got != 4 {
		t.Errorf("CPU %v s, want 4", got)
	}
}
