package controller

import (
	"math"
	"testing"
)

// TestParsePage reads a vLLM v0.11 page: requests on inference handlers only, 5xx as errors,
// the TTFT histogram summed over its series.
func TestParsePage(t *testing.T) {
	page := `# HELP http_requests_total Total number of requests by method, status and handler.
# TYPE http_requests_total counter
http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 80.0
http_requests_total{handler="/v1/completions",method="POST",status="5xx"} 20.0
http_requests_total{handler="/v1/models",method="GET",status="2xx"} 500.0
# HELP http_requests_created Total number of requests by method, status and handler.
# TYPE http_requests_created gauge
http_requests_created{handler="/v1/completions",method="POST",status="2xx"} 1.7e+09
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 10.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} 70.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 80.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 80.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 20.0
`
	s, err := ParsePage([]byte(page), "vllm:time_to_first_token_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if s.Requests != 100 || s.Errors != 20 || s.TTFT[0.5] != 70 || s.TTFT[math.Inf(1)] != 80 {
		t.Errorf("got %+v", s)
	}
}
