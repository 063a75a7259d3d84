// Package proc is what the fake kubelet's runtime keeps of a container's process, whichever
// program it runs (the fake model servers in vllm/, an exec image): its log, bounded as the
// runtime bounds it and rendered as the kubelet's log endpoint serves it, and how it ended.
package proc

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Exit is how the process ended on its own.
type Exit struct {
	Code   int32
	Reason string // "Error", "OOMKilled" or "Completed"
}

// Log is one container run's log, bounded in bytes (oldest lines dropped), as the
// runtime keeps it for `kubectl logs` and `--previous`.
type Log struct {
	mu       sync.Mutex
	lines    []Line
	bytes    int
	maxBytes int
}

// Line is one line of a log and when it was written.
type Line struct {
	At   time.Time
	Text string
}

// NewLog is an empty log that keeps at most maxBytes.
func NewLog(maxBytes int) *Log { return &Log{maxBytes: maxBytes} }

// Printf appends one line.
func (l *Log) Printf(format string, args ...any) {
	line := Line{At: time.Now(), Text: fmt.Sprintf(format, args...)}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	l.bytes += len(line.Text) + 1
	for l.bytes > l.maxBytes && len(l.lines) > 1 {
		l.bytes -= len(l.lines[0].Text) + 1
		l.lines = l.lines[1:]
	}
}

// LogOptions are the kubelet log endpoint's query parameters.
type LogOptions struct {
	TailLines  int // <0: all
	Timestamps bool
	Since      time.Time
	LimitBytes int // 0: no limit
}

// Render is the log as the kubelet serves it.
func (l *Log) Render(o LogOptions) string {
	l.mu.Lock()
	lines := append([]Line(nil), l.lines...)
	l.mu.Unlock()
	var kept []Line
	for _, ln := range lines {
		if o.Since.IsZero() || !ln.At.Before(o.Since) {
			kept = append(kept, ln)
		}
	}
	if o.TailLines >= 0 && len(kept) > o.TailLines {
		kept = kept[len(kept)-o.TailLines:]
	}
	var b strings.Builder
	for _, ln := range kept {
		if o.Timestamps {
			b.WriteString(ln.At.UTC().Format(time.RFC3339Nano))
			b.WriteByte(' ')
		}
		b.WriteString(ln.Text)
		b.WriteByte('\n')
	}
	out := b.String()
	if o.LimitBytes > 0 && len(out) > o.LimitBytes {
		out = out[:o.LimitBytes]
	}
	return out
}

// Cursor is the last line a follower has sent: its time and how many lines at that time.
type Cursor struct {
	at time.Time
	n  int
}

// Last is the cursor after the log's last line.
func (l *Log) Last() Cursor {
	l.mu.Lock()
	defer l.mu.Unlock()
	var c Cursor
	for _, ln := range l.lines {
		if ln.At.Equal(c.at) {
			c.n++
		} else {
			c = Cursor{at: ln.At, n: 1}
		}
	}
	return c
}

// After returns the lines appended after the cursor, and the new cursor.
func (l *Log) After(c Cursor) ([]Line, Cursor) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Line
	seenAt := 0
	for _, ln := range l.lines {
		switch {
		case ln.At.Before(c.at):
			continue
		case ln.At.Equal(c.at):
			seenAt++
			if seenAt <= c.n {
				continue
			}
		}
		out = append(out, ln)
	}
	for _, ln := range out {
		if ln.At.Equal(c.at) {
			c.n++
		} else {
			c = Cursor{at: ln.At, n: 1}
		}
	}
	return out, c
}
