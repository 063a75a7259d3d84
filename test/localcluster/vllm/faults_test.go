package vllm

import (
	"bufio"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

func TestFaultsParse(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		rate    float64
		factor  float64
		wantErr string
	}{
		{env: nil, rate: 0, factor: 1},
		{env: map[string]string{EnvErrorRate: "0.2"}, rate: 0.2, factor: 1},
		{env: map[string]string{EnvTTFTFactor: " 3 "}, rate: 0, factor: 3},
		{env: map[string]string{EnvErrorRate: "1", EnvTTFTFactor: "1.5"}, rate: 1, factor: 1.5},
		{env: map[string]string{EnvErrorRate: "20%"}, wantErr: "LOCALCLUSTER_VLLM_ERROR_RATE '20%' must be a number from 0 to 1"},
		{env: map[string]string{EnvErrorRate: "1.2"}, wantErr: "from 0 to 1"},
		{env: map[string]string{EnvErrorRate: "NaN"}, wantErr: "from 0 to 1"},
		{env: map[string]string{EnvTTFTFactor: "0.5"}, wantErr: "LOCALCLUSTER_VLLM_TTFT_FACTOR '0.5' must be a number of 1 or more"},
		{env: map[string]string{EnvTTFTFactor: "+Inf"}, wantErr: "1 or more"},
	} {
		f, err := parseFaults(tc.env)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want %q", tc.env, err, tc.wantErr)
			}
			continue
		}
		if err != nil || f.errorRate != tc.rate || f.ttftFactor != tc.factor {
			t.Errorf("%v: %+v %v", tc.env, f, err)
		}
	}
}

// TestFaultsSpreadEvenly: a rate fails exactly its share of every run of requests, spread
// through it: 0.2 fails the 5th, 10th, ...; 0.25 one in four; 0 none; 1 all.
func TestFaultsSpreadEvenly(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		n    int
		want []int
	}{{0.2, 20, []int{5, 10, 15, 20}}, {0.25, 8, []int{4, 8}}, {0, 10, nil}, {1, 3, []int{1, 2, 3}}} {
		f := &faults{errorRate: tc.rate, ttftFactor: 1}
		var got []int
		for i := 1; i <= tc.n; i++ {
			if f.fail() {
				got = append(got, i)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("rate %g: failed %v, want %v", tc.rate, got, tc.want)
		}
	}
	var none *faults
	if none.fail() || none.firstTokenDelay(time.Second) != 0 {
		t.Fatal("no knobs fired a fault")
	}
	if d := (&faults{ttftFactor: 3}).firstTokenDelay(100 * time.Millisecond); d != 200*time.Millisecond {
		t.Fatalf("factor 3 adds %v to 100ms, want 200ms", d)
	}
}

// TestFaultsErrorRateServes: a server with LOCALCLUSTER_VLLM_ERROR_RATE=0.2 answers every fifth
// completion as a dead engine does (500, vLLM's ErrorResponse), keeps serving the rest, and
// counts both in http_requests_total as vLLM v0.11's instrumentator does; the knob is logged.
func TestFaultsErrorRateServes(t *testing.T) {
	t.Parallel()
	_, log, url := vtStart(t, proc.Spec{Env: map[string]string{EnvErrorRate: "0.2"}}, Config{TokenTime: time.Millisecond})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	failed := 0
	for i := 1; i <= 20; i++ {
		code, body := vtCall("POST", url+"/v1/completions", `{"prompt":"one two","max_tokens":2}`)
		switch {
		case code == 500 && body == `{"error":{"code":500,"message":"EngineCore encountered an issue. See stack trace (above) for the root cause.","param":null,"type":"InternalServerError"}}`:
			failed++
			if i%5 != 0 {
				t.Fatalf("request %d failed; the 5th, 10th, ... should", i)
			}
		case code != 200:
			t.Fatalf("request %d: %d %s", i, code, body)
		}
	}
	if failed != 4 {
		t.Fatalf("%d of 20 failed, want 4", failed)
	}
	_, m := vtCall("GET", url+"/metrics", "")
	if got := vtMetric(m, `http_requests_total{handler="/v1/completions",method="POST",status="5xx"}`); got != 4 {
		t.Fatalf("5xx counted %g, want 4:\n%s", got, m)
	}
	if got := vtMetric(m, `http_requests_total{handler="/v1/completions",method="POST",status="2xx"}`); got != 16 {
		t.Fatalf("2xx counted %g, want 16:\n%s", got, m)
	}
	if got := vtMetric(m, `vllm:request_success_total{engine="0",finished_reason="length",model_name="Qwen/Qwen3-0.6B"}`); got != 16 {
		t.Fatalf("request_success_total %g, want 16 (a failed request is not a finished one)", got)
	}
	if text := log.Render(proc.LogOptions{TailLines: -1}); !strings.Contains(text, "LOCALCLUSTER_VLLM_ERROR_RATE=0.2: 20% of completions fail") {
		t.Fatalf("the knob is not in the log:\n%s", text)
	}
}

// TestFaultsSlowFirstToken: LOCALCLUSTER_VLLM_TTFT_FACTOR=3 makes the first token come three
// times later than the same server's without it, as the client sees it and as
// vllm:time_to_first_token_seconds records it; the tokens after it come at the usual pace.
func TestFaultsSlowFirstToken(t *testing.T) {
	t.Parallel()
	cfg := Config{TokenTime: 20 * time.Millisecond, PrefillBase: 40 * time.Millisecond}
	ttft := func(env map[string]string) (client, served time.Duration) {
		_, _, url := vtStart(t, proc.Spec{Env: env}, cfg)
		vtWaitStatus(t, "GET", url+"/health", "", 200)
		t0 := time.Now()
		resp, err := vtClient.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":3,"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		if !sc.Scan() {
			t.Fatal("no first chunk")
		}
		client = time.Since(t0)
		for sc.Scan() {
		}
		_, m := vtCall("GET", url+"/metrics", "")
		served = time.Duration(vtMetric(m, "vllm:time_to_first_token_seconds_sum") * float64(time.Second))
		return client, served
	}
	baseC, baseS := ttft(nil)
	slowC, slowS := ttft(map[string]string{EnvTTFTFactor: "3"})
	// the modelled first token is 60ms; 3x is 180ms: allow the loopback's and the timers' slack
	if slowS < 170*time.Millisecond || slowS > 2*baseS+200*time.Millisecond || slowS < 2*baseS+baseS/2 {
		t.Fatalf("served TTFT %v with factor 3, %v without", slowS, baseS)
	}
	if slowC < 170*time.Millisecond || slowC < baseC+100*time.Millisecond {
		t.Fatalf("the client's first chunk after %v with factor 3, %v without", slowC, baseC)
	}
}

// TestFaultsBadKnobFailsStart: a knob the fake cannot read ends the process at start with the
// variable named, as vLLM's own environment checks end it (VLLM_PORT).
func TestFaultsBadKnobFailsStart(t *testing.T) {
	t.Parallel()
	s, log, _ := vtStart(t, proc.Spec{Env: map[string]string{EnvErrorRate: "20%"}}, Config{})
	if st := vtExit(t, s, log); st.Code != 1 {
		t.Fatalf("exit %+v", st)
	}
	if got := vtLastLine(log); !strings.HasSuffix(got, "ValueError: LOCALCLUSTER_VLLM_ERROR_RATE '20%' must be a number from 0 to 1") {
		t.Fatalf("last line %q", got)
	}
}

// TestHTTPRequestsTotalShape: the family in prometheus_client's exact text, before and after
// requests: the excluded handlers (/health, /metrics, /version and /v1/load_lora_adapter, which
// contains "/load") and a refused API key are not counted, an unknown path is handler "none",
// a method a route does not take too.
func TestHTTPRequestsTotalShape(t *testing.T) {
	t.Parallel()
	_, _, url := vtStart(t, proc.Spec{Args: []string{"--api-key", "k", "--enable-lora"},
		Env: map[string]string{"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1"}}, Config{TokenTime: time.Millisecond})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	family := func() string {
		_, m := vtCall("GET", url+"/metrics", "")
		i := strings.Index(m, "# HELP http_requests_total")
		j := strings.Index(m, "# HELP vllm:")
		if i < 0 || j < i {
			t.Fatalf("no http_requests_total before vLLM's own families:\n%s", m)
		}
		return regexp.MustCompile(`(?m)^(http_requests_created\{.*\}) \S+$`).ReplaceAllString(m[i:j], "$1 T")
	}
	const head = "# HELP http_requests_total Total number of requests by method, status and handler.\n# TYPE http_requests_total counter\n"
	if got := family(); got != head {
		t.Fatalf("before any request:\n%s", got)
	}
	auth := []string{"Authorization", "Bearer k"}
	vtCall("GET", url+"/v1/models", "")          // refused: not counted
	vtCall("GET", url+"/v1/models", "", auth...) // 2xx
	vtCall("GET", url+"/version", "")
	vtCall("GET", url+"/health", "")
	vtCall("POST", url+"/v1/load_lora_adapter", `{"lora_name":"a","lora_path":"/nowhere"}`, auth...)
	vtCall("GET", url+"/nope", "")
	vtCall("GET", url+"/v1/completions", "", auth...) // 405
	vtCall("POST", url+"/v1/completions", `{"prompt":"x","max_tokens":1}`, auth...)
	vtCall("POST", url+"/v1/completions", `{"prompt":"x","max_tokens":1}`, auth...)
	want := head +
		`http_requests_total{handler="/v1/models",method="GET",status="2xx"} 1.0` + "\n" +
		`http_requests_total{handler="none",method="GET",status="4xx"} 2.0` + "\n" +
		`http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 2.0` + "\n" +
		"# HELP http_requests_created Total number of requests by method, status and handler.\n# TYPE http_requests_created gauge\n" +
		`http_requests_created{handler="/v1/models",method="GET",status="2xx"} T` + "\n" +
		`http_requests_created{handler="none",method="GET",status="4xx"} T` + "\n" +
		`http_requests_created{handler="/v1/completions",method="POST",status="2xx"} T` + "\n"
	if got := family(); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}
