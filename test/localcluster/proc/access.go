package proc

import "net/http"

// AccessLog is a fake model server's response writer that writes the server's access line
// when the response starts, once, as uvicorn does: a request that ends unanswered logs none.
// The line itself is the engine's own (line).
type AccessLog struct {
	http.ResponseWriter
	line   func(code int)
	logged bool
}

// NewAccessLog wraps w; line writes the access line for the response's status code.
func NewAccessLog(w http.ResponseWriter, line func(code int)) *AccessLog {
	return &AccessLog{ResponseWriter: w, line: line}
}

// WriteHeader logs the access line with code (the first time), then starts the response.
func (a *AccessLog) WriteHeader(code int) {
	if !a.logged {
		a.logged = true
		a.line(code)
	}
	a.ResponseWriter.WriteHeader(code)
}

// Write starts the response with 200 if it has not started.
func (a *AccessLog) Write(b []byte) (int, error) {
	if !a.logged {
		a.WriteHeader(http.StatusOK)
	}
	return a.ResponseWriter.Write(b)
}

// Flush sends what is buffered (a stream's chunk), when the underlying writer can.
func (a *AccessLog) Flush() {
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
