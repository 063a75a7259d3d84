// Package host reads what the benchmarks report of this machine and its processes: the CPU and
// memory, a process found by its executable and its resident memory and CPU time, from /proc.
// A root parameter is the /proc to read (a directory laid out as it is, in tests).
package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Proc is the real /proc.
const Proc = "/proc"

// Find returns the processes under root whose executable is bin (its path, or where it leads).
func Find(root, bin string) ([]int, error) {
	want, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join(root, e.Name(), "exe"))
		if err != nil {
			continue // gone, or another user's
		}
		if exe == want || exe == bin {
			found = append(found, pid)
		}
	}
	return found, nil
}

// FindOne is the one process under root running bin; an error when none or several do
// (which one is measured would be a guess).
func FindOne(root, bin string) (int, error) {
	found, err := Find(root, bin)
	if err != nil {
		return 0, err
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("no process runs %s", bin)
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("%d processes run %s: %v", len(found), bin, found)
}

// KB reads a kB field ("VmRSS:", "MemTotal:") of a file laid out as /proc/PID/status and
// /proc/meminfo are, in bytes.
func KB(path, field string) (int64, error) {
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

// Status reads a kB field of root/PID/status in bytes.
func Status(root string, pid int, field string) (int64, error) {
	return KB(filepath.Join(root, strconv.Itoa(pid), "status"), field)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux architecture
// Go builds for.
const clockTicks = 100

// CPUSeconds is the process's user and system CPU time from root/PID/stat.
func CPUSeconds(root string, pid int) (float64, error) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
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

// SumRSSMiB is the processes' resident memory (VmRSS) in MiB; a process gone counts nothing.
func SumRSSMiB(root string, pids []int) float64 {
	var sum int64
	for _, p := range pids {
		if b, err := Status(root, p, "VmRSS:"); err == nil {
			sum += b
		}
	}
	return float64(sum) / (1 << 20)
}

// SumCPUSeconds is the processes' user and system CPU seconds; a process gone counts nothing.
func SumCPUSeconds(root string, pids []int) float64 {
	var sum float64
	for _, p := range pids {
		if s, err := CPUSeconds(root, p); err == nil {
			sum += s
		}
	}
	return sum
}

// Machine describes this host for a benchmark's header: its CPUs and memory, and that other
// work shares it.
func Machine() string {
	cpu, cores := "unknown CPU", 0
	if b, err := os.ReadFile(filepath.Join(Proc, "cpuinfo")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			switch k = strings.TrimSpace(k); {
			case ok && k == "model name":
				cpu = strings.TrimSpace(v)
			case ok && k == "processor":
				cores++
			}
		}
	}
	mem := ""
	if b, err := KB(filepath.Join(Proc, "meminfo"), "MemTotal:"); err == nil {
		mem = fmt.Sprintf(", %.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%d × %s%s, shared with other engineers' test runs", cores, cpu, mem)
}
