// The activator's process as the local kubelet runs it (a child of the cluster's process, from
// the binary the benchmark built): found by its executable, read from /proc.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// findPID is the one process under procRoot (/proc) whose executable is bin; an error when none
// or several are.
func findPID(procRoot, bin string) (int, error) {
	want, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return 0, err
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
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("no process runs %s", bin)
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("%d processes run %s: %v", len(found), bin, found)
}

// statusBytes reads a kB field of procRoot/PID/status ("VmRSS:") in bytes.
func statusBytes(procRoot string, pid int, field string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in %d's status", field, pid)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux architecture
// Go builds for.
const clockTicks = 100

// cpuSeconds is the process's user and system CPU time from procRoot/PID/stat.
func cpuSeconds(procRoot string, pid int) (float64, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command, field 2, is parenthesized and may hold spaces: count fields after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat of %d: no command", pid)
	}
	f := strings.Fields(s[i+1:])
	// utime and stime are fields 14 and 15; f[0] is field 3.
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
