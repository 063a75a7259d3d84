// The picker processes as the local kubelet runs them (children of the cluster's process, from
// EPP_BIN): found by their executable, read from /proc.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// findPIDs are the processes under procRoot (/proc) whose executable is bin.
func findPIDs(procRoot, bin string) ([]int, error) {
	want, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, err
	}
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join(procRoot, e.Name(), "exe"))
		if err != nil {
			continue // gone, or another user's
		}
		if exe == want || exe == bin {
			found = append(found, pid)
		}
	}
	return found, nil
}

// sumRSSMiB is the processes' resident memory (VmRSS), in MiB.
func sumRSSMiB(pids []int) float64 {
	var sum int64
	for _, p := range pids {
		if b, err := statusLike(filepath.Join("/proc", strconv.Itoa(p), "status"), "VmRSS:"); err == nil {
			sum += b
		}
	}
	return float64(sum) / (1 << 20)
}

// sumCPU is the processes' user and system CPU seconds.
func sumCPU(pids []int) float64 {
	var sum float64
	for _, p := range pids {
		if s, err := cpuSeconds("/proc", p); err == nil {
			sum += s
		}
	}
	return sum
}

// statusLike reads a kB field of a /proc status-like file (status, meminfo) in bytes.
func statusLike(path, field string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in %s", field, path)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times.
const clockTicks = 100

// cpuSeconds is the process's user and system CPU time from procRoot/PID/stat.
func cpuSeconds(procRoot string, pid int) (float64, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat of %d: no command", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("stat of %d: %d fields", pid, len(f)+2)
	}
	u, err := strconv.ParseFloat(f[11], 64)
	if err != nil {
		return 0, err
	}
	st, err := strconv.ParseFloat(f[12], 64)
	if err != nil {
		return 0, err
	}
	return (u + st) / clockTicks, nil
}
