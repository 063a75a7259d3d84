package memcg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestParseOwnGroup(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{in: "9:name=systemd:/\n4:memory:/process_api/abc\n0::/\n", want: "/process_api/abc"},
		{in: "5:cpu,memory:/a/b\n", want: "/a/b"},
		{in: "3:memory:/\n", want: "/"},
		{in: "0::/user.slice\n", err: true},  // v2 only
		{in: "4:memoryx:/nope\n", err: true}, // not the memory controller
		{in: "garbage\n\n", err: true},
	} {
		got, err := parseOwnGroup(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseOwnGroup(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseField(t *testing.T) {
	got, err := parseField("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "memory.oom_control", "oom_kill")
	if err != nil || got != 3 {
		t.Errorf("got %d, %v; want 3", got, err)
	}
	// A kernel before 4.13 has no oom_kill line: unknown, not 0 kills.
	if _, err := parseField("oom_kill_disable 0\nunder_oom 0\n", "memory.oom_control", "oom_kill"); err == nil {
		t.Error("no oom_kill line: want an error, not 0 kills")
	}
	if got, err := parseField("cache 4096\ntotal_inactive_file 8192\ninactive_file 0\n", "memory.stat", "inactive_file"); err != nil || got != 0 {
		t.Errorf("inactive_file: got %d, %v; want 0 (not total_inactive_file's)", got, err)
	}
}

// allocEnv makes the test binary a child that touches that many MiB, prints its cgroup
// file and exits.
const allocEnv = "MEMCG_TEST_ALLOC_MIB"

func TestMain(m *testing.M) {
	if s := os.Getenv(allocEnv); s != "" {
		mib, _ := strconv.Atoi(s)
		b := make([]byte, mib<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		cg, _ := os.ReadFile("/proc/self/cgroup")
		fmt.Print(string(cg))
		os.Exit(int(b[len(b)-4096]) - 1)
	}
	os.Exit(m.Run())
}

// newGroup makes a group for the test, or skips where this machine cannot have one.
func newGroup(t *testing.T, limit int64) *Group {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a memory cgroup needs root")
	}
	if _, err := os.Stat(v1Root); err != nil {
		t.Skipf("no cgroup v1 memory controller: %v", err)
	}
	g, err := New(fmt.Sprintf("memcg-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-")), limit)
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrNotExist) {
		t.Skipf("this machine gives no memory cgroup to make: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	return g
}

func child(t *testing.T, g *Group, mib int) (*exec.Cmd, string, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy: the test binary's own pages are mapped by this process and cannot be dropped.
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(t.TempDir(), "child")
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", allocEnv, mib))
	if err := g.Enter(cmd); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.Output()
	return cmd, string(out), err
}

func TestUnderTheLimitRunsAndIsCharged(t *testing.T) {
	g := newGroup(t, 64<<20)
	_, out, err := child(t, g, 16)
	if err != nil {
		t.Fatalf("child under the limit: %v", err)
	}
	// The program itself, not only the shell before it, ran in the group.
	if !strings.Contains(out, g.dir[len(v1Root):]) {
		t.Errorf("child's /proc/self/cgroup does not name the group %s:\n%s", g.dir, out)
	}
	// The program's pages were read by it, as a container reads its binary's, and charged.
	if cache, err := g.Stat("total_cache"); err != nil || cache < 1<<20 {
		t.Errorf("total_cache = %d, %v; want the program's pages (over 1 MiB)", cache, err)
	}
	if limit, err := g.Limit(); err != nil || limit != 64<<20 {
		t.Errorf("Limit() = %d, %v; want %d", limit, err, 64<<20)
	}
	peak, err := g.Peak()
	if err != nil || peak < 16<<20 {
		t.Errorf("Peak() = %d, %v; want at least the 16 MiB touched", peak, err)
	}
	if kills, err := g.OOMKills(); err != nil || kills != 0 {
		t.Errorf("OOMKills() = %d, %v; want 0", kills, err)
	}
}

func TestOverTheLimitIsKilledByTheKernel(t *testing.T) {
	g := newGroup(t, 32<<20)
	cmd, _, err := child(t, g, 96)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child touching 96 MiB under 32 MiB: %v, want it killed", err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("child ended %v, want SIGKILL from the OOM killer", cmd.ProcessState)
	}
	if kills, err := g.OOMKills(); err != nil || kills != 1 {
		t.Errorf("OOMKills() = %d, %v; want 1", kills, err)
	}
	if peak, err := g.Peak(); err != nil || peak < 30<<20 || peak > 32<<20+64<<10 { // a page or so past, as the kernel charges
		t.Errorf("Peak() = %d, %v; want the limit reached, not passed", peak, err)
	}
}
