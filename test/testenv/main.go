package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// SetupTimeout bounds a suite's setup: the cluster started, the binaries built, what the
// suite installs.
const SetupTimeout = 15 * time.Minute

// Suite is what a suite's TestMain does around its tests: set up, run, tear down, keep a
// failed run's files on request. TestMain is then os.Exit(Suite{...}.Run(m)).
type Suite struct {
	// Name prefixes the setup's error ("NAME setup: ...") and names the variable that keeps
	// the scratch directory, NAME_KEEP in upper case (E2E_KEEP, SOAK_KEEP...).
	Name string
	// Setup prepares the suite's environment within SetupTimeout; its context lasts until the
	// tests end.
	Setup func(ctx context.Context) error
	// Teardown undoes what Setup did, also when Setup failed part way; keep (NAME_KEEP set):
	// the scratch directory stays for a look.
	Teardown func(keep bool)
	// Logs says where a failed run's logs are ("operator logs in DIR"); the keep variable
	// follows it.
	Logs func() string
	// SetupTimeout bounds Setup; zero is SetupTimeout.
	SetupTimeout time.Duration
}

// Run sets up, runs the tests and tears down; its result is the process's exit code.
func (s Suite) Run(m *testing.M) int {
	timeout := s.SetupTimeout
	if timeout == 0 {
		timeout = SetupTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	keepVar := strings.ToUpper(s.Name) + "_KEEP"
	keep := os.Getenv(keepVar) != ""
	if err := s.Setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, s.Name+" setup:", err)
		s.Teardown(keep)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, s.Logs(), "(kept with "+keepVar+"=1)")
	}
	s.Teardown(keep)
	return code
}
