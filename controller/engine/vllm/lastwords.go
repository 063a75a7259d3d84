// The last words of a crashed vLLM server: the line of its log that says why it died.

package vllm

import (
	"regexp"
	"strings"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// DecisiveLine is the line of a crashed model server's log tail that says why it died: the
// exception that ended the last Python traceback (the root cause when that exception only
// points "above" to it, as vLLM's engine start-up and engine death do), else argparse's error
// (an unknown argument), else the last line (a process killed by the kernel stops mid-line of
// whatever it was doing). At most engine.MaxLastWords bytes.
func DecisiveLine(log string) string {
	return decisive(strings.Split(log, "\n"))
}

// argparseError is argparse's last line: "vllm serve: error: unrecognized arguments: --foo".
var argparseError = regexp.MustCompile(`^[\w./ -]+: error: `)

func decisive(raw []string) string {
	lines := make([]string, 0, len(raw))
	for _, l := range raw {
		_, l = cutProcess(l)
		l = strings.TrimRight(l, " \t\r")
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	// An exception line is the first unindented line after a traceback's frames (indented,
	// with at least one `File "..."` line; a tail may begin inside them).
	var exceptions []string
	inFrames := false
	for i, l := range lines {
		indented := l[0] == ' ' || l[0] == '\t'
		switch {
		case indented:
			inFrames = inFrames || strings.HasPrefix(strings.TrimSpace(l), "File \"") || strings.HasPrefix(strings.TrimSpace(l), "raise ")
		case inFrames:
			exceptions = append(exceptions, pydanticCause(l, lines[i+1:]))
			inFrames = false
		}
	}
	for i := len(exceptions) - 1; i >= 0; i-- {
		if i == 0 || !strings.Contains(exceptions[i], "root cause") {
			return engine.Bounded(exceptions[i])
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if argparseError.MatchString(lines[i]) {
			return engine.Bounded(lines[i])
		}
	}
	return engine.Bounded(strings.TrimSpace(lines[len(lines)-1]))
}

// pydanticCause is the error a pydantic ValidationError wraps, which vLLM's config classes
// raise for their own checks: "pydantic_core._pydantic_core.ValidationError: 1 validation error
// for VllmConfig" says nothing, the next line "  Value error, Total number of attention heads
// (32) must be divisible by tensor parallel size (3). [type=value_error, ...]" says why. Other
// exception lines are themselves.
func pydanticCause(exc string, rest []string) string {
	if !strings.Contains(exc, "ValidationError: ") || len(rest) == 0 {
		return exc
	}
	msg, ok := strings.CutPrefix(strings.TrimSpace(rest[0]), "Value error, ")
	if !ok {
		return exc
	}
	if i := strings.LastIndex(msg, " [type="); i > 0 {
		msg = msg[:i]
	}
	return "ValueError: " + msg
}
