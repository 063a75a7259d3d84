package impure

import "net/http"

// A test file may do I/O.
var _ = http.Get
