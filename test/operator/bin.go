package operator

import (
	"os"
	"testing"
)

// Bin is the binary of a component `make <target>` builds, from the environment variable
// env: without it a test is skipped on a developer's machine and fails under CI, where
// `make test` always builds it.
func Bin(t testing.TB, env, target string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		msg := env + " is unset: build it with `make " + target + "` and run with " + env + "=$PWD/test/" + target + "/bin/" + target
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}
