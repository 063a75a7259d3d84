package activator

import (
	"net/http"
	"time"
)

// firstByte records a cold request's time from arrival to its first response byte: the cold
// start as the client lived it, pod start and model load included.
type firstByte struct {
	http.ResponseWriter
	arrived time.Time
	observe func(time.Duration)
	seen    bool
}

func (f *firstByte) mark() {
	if !f.seen {
		f.seen = true
		f.observe(time.Since(f.arrived))
	}
}

func (f *firstByte) WriteHeader(code int) {
	f.mark()
	f.ResponseWriter.WriteHeader(code)
}

func (f *firstByte) Write(b []byte) (int, error) {
	f.mark()
	return f.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (the proxy's per-write flush) reach the real writer.
func (f *firstByte) Unwrap() http.ResponseWriter { return f.ResponseWriter }
