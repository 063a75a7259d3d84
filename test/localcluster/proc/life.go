package proc

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Life is how a fake model server's process ends, whichever engine it fakes: stopped by the
// kubelet (SIGTERM) or exiting on its own, once. Its end closes the HTTP port the process
// serves on, cancels what waits on Stopped (loading, requests in flight), stops a pending
// crash and runs what the process asked to run then (a rendezvous closing). Only an exit on
// its own is reported on Exited. The engine's server keeps its own words: what it logs on a
// stop or a taken port is passed in.
//
// Its lock also guards the server's own fields that change as the process comes up (the
// engine, the parsed arguments): Lock, Unlock and the methods marked "lock held".
type Life struct {
	mu      sync.Mutex
	srv     *http.Server  // nil until the HTTP server listens
	done    bool          // stopped or exited: no more exits, no more serving
	stopCh  chan struct{} // closed when done
	crashAt *time.Timer   // a crashloop server's pending death
	onEnd   []func()      // run once when the process ends
	exited  chan Exit
}

// NewLife is a process that has not ended.
func NewLife() *Life {
	return &Life{stopCh: make(chan struct{}), exited: make(chan Exit, 1)}
}

// Lock takes the lock of the process's end.
func (l *Life) Lock() { l.mu.Lock() }

// Unlock releases it.
func (l *Life) Unlock() { l.mu.Unlock() }

// Over reports whether the process has ended (lock held).
func (l *Life) Over() bool { return l.done }

// Serving reports whether the HTTP server listens (lock held).
func (l *Life) Serving() bool { return l.srv != nil }

// Exited delivers the process's exit when it ends on its own; nothing when stopped.
func (l *Life) Exited() <-chan Exit { return l.exited }

// Stopped is closed when the process ends.
func (l *Life) Stopped() <-chan struct{} { return l.stopCh }

// Stop is the kubelet's SIGTERM, once. If the process was serving, closing runs before its
// port closes and closed after (both lock held): the engine's shutdown lines.
func (l *Life) Stop(closing, closed func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.End() || l.srv == nil {
		return
	}
	if closing != nil {
		closing()
	}
	_ = l.srv.Close()
	if closed != nil {
		closed()
	}
}

// Exit ends the process on its own: the port closes and Exited reports st, unless it had
// ended first.
func (l *Life) Exit(st Exit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.End() {
		return
	}
	if l.srv != nil {
		_ = l.srv.Close()
	}
	l.exited <- st
}

// End marks the process over, once (lock held): Stopped closes, a pending crash is cancelled
// and what OnEnd kept runs. False: it had already ended.
func (l *Life) End() bool {
	if l.done {
		return false
	}
	l.done = true
	close(l.stopCh)
	if l.crashAt != nil {
		l.crashAt.Stop()
	}
	for _, f := range l.onEnd {
		f()
	}
	return true
}

// Ended reports whether the process is over.
func (l *Life) Ended() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// OnEnd runs start now and keeps end to run when the process ends, both lock held, so that
// an end cannot come between them. False: it has already ended; neither runs.
func (l *Life) OnEnd(start, end func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return false
	}
	if start != nil {
		start()
	}
	l.onEnd = append(l.onEnd, end)
	return true
}

// CrashAfter runs crash after d, unless the process ends first.
func (l *Life) CrashAfter(d time.Duration, crash func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.crashAt = time.AfterFunc(d, crash)
	}
}

// Wait sleeps d unless the process ends first; false: it ended.
func (l *Life) Wait(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-l.stopCh:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.stopCh:
		return false
	}
}

// Listen opens the HTTP port at addr with h, its listener passed through guard, as uvicorn
// serves (an idle keep-alive connection closed after 5 s: timeout_keep_alive=5). False: the
// process ended meanwhile, or the address is taken; then taken logs the engine's error (lock
// held) and the process exits 1.
func (l *Life) Listen(addr string, h http.Handler, guard func(net.Listener) net.Listener, taken func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return false
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		taken()
		l.End()
		l.exited <- Exit{Code: 1, Reason: "Error"}
		return false
	}
	l.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second}
	go func() { _ = l.srv.Serve(guard(ln)) }()
	return true
}
