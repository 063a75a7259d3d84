// The last words of a crashed SGLang server: the line of its log that says why it died.

package sglang

import (
	"regexp"
	"strings"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// argparseError is argparse's last line: "launch_server.py: error: unrecognized arguments:
// --foo" (prepare_server_args parses with a plain argparse.ArgumentParser, whose prog is the
// script's name; "python3 -m sglang.launch_server" makes it launch_server.py).
var argparseError = regexp.MustCompile(`^[\w./ -]+: error: `)

// sigquitLine is what the launcher prints when a child (the scheduler, the detokenizer) died:
// engine.py's launch_phase_sigquit_handler / http_server's "Received sigquit from a child
// process. It usually means the child failed." It only points at the child's own traceback.
const sigquitLine = "Received sigquit from a child process"

// DecisiveLine is the line of a crashed SGLang server's log tail that says why it died: the
// exception that ended the last Python traceback, else argparse's error, else the last line
// that is not the launcher's pointer at a failed child. At most engine.MaxLastWords bytes.
// SGLang's scheduler logs its crash as "Scheduler hit an exception: Traceback ..." followed by
// the traceback's lines and the exception, then kills the process tree; the exception
// ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
// "torch.OutOfMemoryError: CUDA out of memory. ...") is the decisive line.
func DecisiveLine(log string) string { return decisive(strings.Split(log, "\n")) }

func decisive(raw []string) string {
	lines := make([]string, 0, len(raw))
	for _, l := range raw {
		l = ansiEscape.ReplaceAllString(l, "")
		if _, rest := cutStamp(l); rest != l {
			l = rest
		}
		if m := sglangLine.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			l = m[2]
		}
		l = strings.TrimRight(l, " \t\r")
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	// An exception line is the first unindented line after a traceback's frames.
	last := ""
	inFrames := false
	for _, l := range lines {
		indented := l[0] == ' ' || l[0] == '\t'
		switch {
		case indented:
			t := strings.TrimSpace(l)
			inFrames = inFrames || strings.HasPrefix(t, "File \"") || strings.HasPrefix(t, "raise ")
		case inFrames:
			last = l
			inFrames = false
		}
	}
	if last != "" {
		return engine.Bounded(last)
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if argparseError.MatchString(lines[i]) {
			return engine.Bounded(lines[i])
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if !strings.Contains(lines[i], sigquitLine) {
			return engine.Bounded(strings.TrimSpace(lines[i]))
		}
	}
	return engine.Bounded(strings.TrimSpace(lines[len(lines)-1]))
}
