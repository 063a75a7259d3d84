// Package memcg runs a process under a kernel memory limit, a memory cgroup as a container's
// limits.memory is, and reads back what the kernel saw: the peak charged and the OOM kills.
// A measured "fits in 128 MiB" is then the kernel's word, not a reading of RSS against a number.
//
// Only the cgroup v1 memory controller (the hierarchy mounted at /sys/fs/cgroup/memory, as on
// the machines this project is measured on) is handled; elsewhere New says so.
package memcg

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// v1Root is where the v1 memory controller is mounted.
const v1Root = "/sys/fs/cgroup/memory"

// Group is one memory cgroup made for one process.
type Group struct {
	dir string
}

// New makes the group name below this process's own memory cgroup (so the limit nests inside
// whatever limits this process), limited to limit bytes with swap counted in it.
func New(name string, limit int64) (*Group, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("memcg: limit %d is not positive", limit)
	}
	parent, err := ownGroup("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	base := filepath.Join(v1Root, parent)
	if _, err := os.Stat(filepath.Join(base, "memory.limit_in_bytes")); err != nil {
		return nil, fmt.Errorf("memcg: no cgroup v1 memory controller at %s (cgroup v2 is not handled): %w", base, err)
	}
	g := &Group{dir: filepath.Join(base, name)}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("memcg: %w", err)
	}
	if err := g.write("memory.limit_in_bytes", limit); err != nil {
		_ = os.Remove(g.dir)
		return nil, err
	}
	// Without swap in the limit the kernel would swap the process out rather than kill it,
	// where a container with no swap is killed.
	if _, err := os.Stat(filepath.Join(g.dir, "memory.memsw.limit_in_bytes")); err == nil {
		if err := g.write("memory.memsw.limit_in_bytes", limit); err != nil {
			_ = os.Remove(g.dir)
			return nil, err
		}
	}
	return g, nil
}

// ownGroup reads the memory controller's path from a /proc/PID/cgroup file.
func ownGroup(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("memcg: %w", err)
	}
	return parseOwnGroup(string(b))
}

// parseOwnGroup finds the memory controller's line, "ID:memory:/path", in /proc/PID/cgroup.
func parseOwnGroup(s string) (string, error) {
	for _, line := range strings.Split(s, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return parts[2], nil
			}
		}
	}
	return "", errors.New("memcg: this process is in no cgroup v1 memory hierarchy (cgroup v2 is not handled)")
}

// Enter makes cmd join the group before it execs its program: a shell writes its own pid to
// the group and execs in place, so everything the program allocates from its first
// instruction is charged, and cmd.Process.Pid is the program's. The program's file is first
// dropped from the page cache: a page is charged to the group that reads it first, and a
// container reads its binary's pages itself. Call it before cmd.Start.
func (g *Group) Enter(cmd *exec.Cmd) error {
	if err := uncache(cmd.Path); err != nil {
		return err
	}
	argv := append([]string{"sh", "-c", `echo $$ > "$1" && shift && exec "$@"`, "sh",
		filepath.Join(g.dir, "cgroup.procs"), cmd.Path}, cmd.Args[1:]...)
	cmd.Path, cmd.Args = "/bin/sh", argv
	return nil
}

// uncache writes path's dirty pages and drops its pages from the page cache.
func uncache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("memcg: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("memcg: %w", err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("memcg: dropping %s from the page cache: %w", path, err)
	}
	return nil
}

// WorkingSet is what the kubelet and kubectl top count as the group's memory, and evict on:
// its charge less the page cache it has not touched lately (usage - total_inactive_file).
func (g *Group) WorkingSet() (int64, error) {
	usage, err := g.read("memory.usage_in_bytes")
	if err != nil {
		return 0, err
	}
	inactive, err := g.Stat("total_inactive_file")
	if err != nil {
		return 0, err
	}
	return max(usage-inactive, 0), nil
}

// Limit is the limit the kernel holds the group to.
func (g *Group) Limit() (int64, error) { return g.read("memory.limit_in_bytes") }

// Peak is the most the group was charged at once: anonymous memory and the page cache its
// processes read first (which the kernel reclaims before it kills).
func (g *Group) Peak() (int64, error) { return g.read("memory.max_usage_in_bytes") }

// OOMKills counts the group's processes the kernel killed for memory (kernels before 4.13
// do not count them: an error).
func (g *Group) OOMKills() (int64, error) { return g.field("memory.oom_control", "oom_kill") }

// Stat reads one counter of the group's memory.stat (bytes, for the size fields).
func (g *Group) Stat(key string) (int64, error) { return g.field("memory.stat", key) }

// field reads a "key value" line of one of the group's files.
func (g *Group) field(file, key string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(g.dir, file))
	if err != nil {
		return 0, fmt.Errorf("memcg: %w", err)
	}
	return parseField(string(b), file, key)
}

func parseField(s, file, key string) (int64, error) {
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("memcg: %s has no %s", file, key)
}

// Close removes the group; the kernel refuses while a process is still in it.
func (g *Group) Close() error {
	if err := os.Remove(g.dir); err != nil {
		return fmt.Errorf("memcg: %w", err)
	}
	return nil
}

func (g *Group) write(file string, v int64) error {
	if err := os.WriteFile(filepath.Join(g.dir, file), []byte(strconv.FormatInt(v, 10)), 0o644); err != nil {
		return fmt.Errorf("memcg: %w", err)
	}
	return nil
}

func (g *Group) read(file string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(g.dir, file))
	if err != nil {
		return 0, fmt.Errorf("memcg: %w", err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("memcg: %s: %w", file, err)
	}
	return v, nil
}
