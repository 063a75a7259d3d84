// Building the localcluster binary, cached by a hash of its sources and shared between test processes.

package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/example/inferenceservice-operator/test/buildprogress"
)

// RepoRoot returns the root of the repository (the directory holding the
// root go.mod), found from this file's location or `go env GOMOD`.
func RepoRoot() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
		if exists(filepath.Join(root, "test", "localcluster", "go.mod")) {
			return root, nil
		}
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("cannot find the repository root (no go.mod)")
	}
	root := filepath.Dir(gomod)
	for d := root; ; d = filepath.Dir(d) {
		if exists(filepath.Join(d, "test", "localcluster", "go.mod")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", fmt.Errorf("no test/localcluster above %s", root)
}

// LDFlags are the linker flags every build of localcluster uses: they stamp
// the Kubernetes version, or the server would report v0.0.0-master. Keep
// them identical everywhere (test/localcluster/build.sh reads the same
// file) so the Go build cache is shared.
func LDFlags(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "test", "localcluster", "ldflags"))
	if err != nil {
		return "", err
	}
	return strings.Join(strings.Fields(string(b)), " "), nil
}

// sourceHash hashes the localcluster sources, go.mod/go.sum, the ldflags
// and the Go version: the binary is rebuilt when any of them changes.
func sourceHash(dir, ldflags string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "bin" || strings.HasPrefix(d.Name(), ".") && p != dir {
				return filepath.SkipDir
			}
			return nil
		}
		n := d.Name()
		if strings.HasSuffix(n, ".go") || n == "go.mod" || n == "go.sum" || n == "ldflags" {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s/%s\n", runtime.Version(), ldflags, runtime.GOOS, runtime.GOARCH)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, f)
		fmt.Fprintf(h, "%s %d\n", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Build builds test/localcluster once and returns the binary's path. The
// binary is cached in test/localcluster/bin/ keyed by a hash of the
// sources; a file lock keeps parallel test processes from building twice.
// Env LOCALCLUSTER_BIN names a prebuilt binary instead.
func Build(ctx context.Context) (string, error) {
	if bin := os.Getenv("LOCALCLUSTER_BIN"); bin != "" {
		if !exists(bin) {
			return "", fmt.Errorf("LOCALCLUSTER_BIN=%s does not exist", bin)
		}
		return bin, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "test", "localcluster")
	ldflags, err := LDFlags(root)
	if err != nil {
		return "", err
	}
	hash, err := sourceHash(dir, ldflags)
	if err != nil {
		return "", err
	}
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(binDir, "localcluster-"+hash)
	if exists(bin) {
		return bin, nil
	}
	lock, err := os.OpenFile(filepath.Join(binDir, ".build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := flock(ctx, lock); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if exists(bin) { // built by another process while we waited
		return bin, nil
	}
	tmp := bin + ".tmp" + strconv.Itoa(os.Getpid())
	fmt.Fprintf(os.Stderr, "cluster: building %s (a cold Go cache takes 7-9 minutes on 2 cores)\n", bin)
	started := time.Now()
	defer func() { fmt.Fprintf(os.Stderr, "cluster: build took %v\n", time.Since(started).Round(time.Second)) }()
	// Packages of the total, elapsed, an estimate: a cold build is silent for minutes otherwise.
	if err := buildprogress.Build(ctx, "localcluster", dir, append(buildEnv(), "CGO_ENABLED=0"), os.Stderr, "-ldflags", ldflags, "-o", tmp, "."); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("building localcluster: %w", err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	// Keep only the newest binary around.
	if old, _ := filepath.Glob(filepath.Join(binDir, "localcluster-*")); len(old) > 0 {
		for _, o := range old {
			if o != bin && !strings.Contains(o, ".tmp") {
				os.Remove(o)
			}
		}
	}
	return bin, nil
}

// buildEnv is the environment without settings that would point the build
// at another module file.
func buildEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "GOFLAGS=") && strings.Contains(e, "-modfile") {
			continue
		}
		if strings.HasPrefix(e, "CGO_ENABLED=") || strings.HasPrefix(e, "GOWORK=") {
			continue
		}
		env = append(env, e)
	}
	return append(env, "GOWORK=off")
}

func flock(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
