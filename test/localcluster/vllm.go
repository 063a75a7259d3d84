// The fake model server: what a vLLM container runs on its pod's IP, as far as the kubelet,
// the probes, `kubectl logs` and clients can tell. The contract the kubelet uses is this file;
// the engine behind it is in vllm_*.go.

package main

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// servesModel says whether a container runs the fake vLLM server: a vLLM image (the last
// path element of its repository contains "vllm") or any image under kubelet.fake/.
func servesModel(image string) bool {
	if strings.HasPrefix(image, fakeRegistry) {
		return true
	}
	repo := image
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndex(repo, "/"); i >= 0 {
		repo = repo[i+1:]
	}
	if i := strings.Index(repo, ":"); i >= 0 {
		repo = repo[:i]
	}
	return strings.Contains(repo, "vllm")
}

// modelServerSpec is what a fake vLLM process sees of its container, as a real process would.
type modelServerSpec struct {
	Image   string
	Command []string // the container's command; nil: the image's entrypoint (`vllm serve`)
	Args    []string
	Env     map[string]string // resolved environment, service links and Secrets included
	// GPUs the device plugin allocated to the container (its limit of any */gpu resource).
	GPUs int
	// MemoryLimit in bytes; 0: none.
	MemoryLimit int64
	// ShmSize is the size of what is mounted at /dev/shm: -1 nothing (the runtime's 64Mi),
	// 0 memory-backed without a limit, else the emptyDir's sizeLimit in bytes.
	ShmSize int64
	// Mounts maps each mount path to the identity of its volume ("pvc:<ns>/<claim>",
	// "emptyDir:<pod uid>/<volume>", ...), so a weights cache survives what its volume survives.
	Mounts   map[string]string
	Behavior behavior // the kubelet.fake failure mode; bReady for plain vLLM images
	IP       string   // the pod's IP
}

// exitStatus is how the process ended on its own.
type exitStatus struct {
	Code   int32
	Reason string // "Error", "OOMKilled" or "Completed"
}

// serverConfig is what every fake model server of one kubelet shares.
type serverConfig struct {
	LoadTime  time.Duration // default time to load weights
	TokenTime time.Duration // per generated token
}

// modelServer is one running fake vLLM process.
type modelServer struct {
	spec   modelServerSpec
	log    *containerLog
	port   int
	exited chan exitStatus
	stopMu sync.Mutex
	srv    *http.Server
	done   bool
}

// startModelServer starts the process: it writes its log, loads the weights (the port stays
// closed meanwhile), then serves on spec.IP:port until Stop, unless it exits on its own
// (a bad argument, out of memory, ...), which it reports once on Exited.
func startModelServer(spec modelServerSpec, cfg serverConfig, log *containerLog) *modelServer {
	s := &modelServer{spec: spec, log: log, port: 8000, exited: make(chan exitStatus, 1)}
	for i, a := range spec.Args {
		if a == "--port" && i+1 < len(spec.Args) {
			if p, err := strconv.Atoi(spec.Args[i+1]); err == nil {
				s.port = p
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", net.JoinHostPort(spec.IP, strconv.Itoa(s.port)))
	if err != nil {
		log.Printf("OSError: [Errno 98] Address already in use: %v", err)
		s.exited <- exitStatus{Code: 1, Reason: "Error"}
		return s
	}
	log.Printf("INFO Starting vLLM API server on http://%s", ln.Addr())
	go func() { _ = s.srv.Serve(ln) }()
	return s
}

// Exited delivers the process's exit when it ends on its own; nothing when stopped.
func (s *modelServer) Exited() <-chan exitStatus { return s.exited }

// Port is where the server listens (or will, once loaded).
func (s *modelServer) Port() int { return s.port }

// Stop is the SIGTERM a kubelet sends: the server logs its shutdown and closes its port.
func (s *modelServer) Stop() {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	if s.done {
		return
	}
	s.done = true
	s.log.Printf("INFO Shutting down FastAPI HTTP server.")
	_ = s.srv.Close()
}

// containerLog is one container run's log, bounded in bytes (oldest lines dropped), as the
// runtime keeps it for `kubectl logs` and `--previous`.
type containerLog struct {
	mu       sync.Mutex
	lines    []logLine
	bytes    int
	maxBytes int
}

type logLine struct {
	at   time.Time
	text string
}

func newContainerLog(maxBytes int) *containerLog { return &containerLog{maxBytes: maxBytes} }

// Printf appends one line.
func (l *containerLog) Printf(format string, args ...any) {
	line := logLine{at: time.Now(), text: fmt.Sprintf(format, args...)}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	l.bytes += len(line.text) + 1
	for l.bytes > l.maxBytes && len(l.lines) > 1 {
		l.bytes -= len(l.lines[0].text) + 1
		l.lines = l.lines[1:]
	}
}

// logOptions are the kubelet log endpoint's query parameters.
type logOptions struct {
	TailLines  int // <0: all
	Timestamps bool
	Since      time.Time
	LimitBytes int // 0: no limit
}

// Render is the log as the kubelet serves it.
func (l *containerLog) Render(o logOptions) string {
	l.mu.Lock()
	lines := append([]logLine(nil), l.lines...)
	l.mu.Unlock()
	var kept []logLine
	for _, ln := range lines {
		if o.Since.IsZero() || !ln.at.Before(o.Since) {
			kept = append(kept, ln)
		}
	}
	if o.TailLines >= 0 && len(kept) > o.TailLines {
		kept = kept[len(kept)-o.TailLines:]
	}
	var b strings.Builder
	for _, ln := range kept {
		if o.Timestamps {
			b.WriteString(ln.at.UTC().Format(time.RFC3339Nano))
			b.WriteByte(' ')
		}
		b.WriteString(ln.text)
		b.WriteByte('\n')
	}
	out := b.String()
	if o.LimitBytes > 0 && len(out) > o.LimitBytes {
		out = out[:o.LimitBytes]
	}
	return out
}
