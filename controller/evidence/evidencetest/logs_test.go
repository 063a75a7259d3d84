package evidencetest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestLogEndpoint(t *testing.T) {
	l := &LogEndpoint{Current: "now", Prev: "before"}
	s := httptest.NewServer(l)
	defer s.Close()
	get := func(q string) (int, string) {
		r, err := http.Get(s.URL + "/api/v1/namespaces/default/pods/p/log?" + q)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	if code, body := get("container=vllm"); code != 200 || body != "now" {
		t.Fatalf("current run: %d %q", code, body)
	}
	if code, body := get("container=vllm&previous=true"); code != 200 || body != "before" {
		t.Fatalf("previous run: %d %q", code, body)
	}
	l.Code = http.StatusForbidden
	if code, _ := get("container=vllm"); code != http.StatusForbidden {
		t.Fatalf("forbidden: %d", code)
	}
	if reads := l.Take(); len(reads) != 3 || reads[1] != "GET /api/v1/namespaces/default/pods/p/log container=vllm previous=true tailLines= limitBytes= timestamps=" {
		t.Fatalf("reads %q", reads)
	}
	if reads := l.Take(); len(reads) != 0 {
		t.Fatalf("reads after Take: %q", reads)
	}
}
