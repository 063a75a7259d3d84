package vllm

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// The signer against AWS's worked example (S3 API reference, "Signature Calculations for the
// Authorization Header", GET Object): same secret, date and headers, same signature.
func TestS3SignAWSExample(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://examplebucket.s3.amazonaws.com/test.txt", nil)
	req.Header.Set("Range", "bytes=0-9")
	c := s3Client{region: "us-east-1", id: "AKIAIOSFODNN7EXAMPLE", secret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
	c.sign(req, time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC))
	want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
	if got := req.Header.Get("Authorization"); got != want {
		t.Fatalf("Authorization\n got %s\nwant %s", got, want)
	}
}

func TestParseS3Fill(t *testing.T) {
	d, ok := parseS3Fill([]string{"python3", "-c", "import os\nimport boto3\n"}, []string{"s3://models/q", "/root/.cache/huggingface/s3/models/q"})
	if !ok || d.src != "s3://models/q" || d.dest != "/root/.cache/huggingface/s3/models/q" {
		t.Fatalf("%+v %v", d, ok)
	}
	if _, ok := parseS3Fill([]string{"python3", "-c", "from huggingface_hub import snapshot_download"}, []string{"gpt2", "main"}); ok {
		t.Fatal("the hub fill taken for the s3 fill")
	}
}

// A fill against a stub store: the listing under PREFIX/ read and every object fetched with a
// signature, the progress line, the directory held on the volume, and a vLLM loading it;
// a refusal in botocore's words, exit 4; a directory not copied refused as vLLM refuses a
// missing one.
func TestS3FillCopiesTheDirectory(t *testing.T) {
	t.Parallel()
	objects := map[string]int{"Qwen3-0.6B/config.json": 7, "Qwen3-0.6B/model.safetensors": 1200}
	var gets []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Authorization"), "Credential=AKID/") {
			w.WriteHeader(403)
			fmt.Fprint(w, `<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match the signature you provided. Check your key and signing method.</Message></Error>`)
			return
		}
		gets = append(gets, r.URL.Path)
		if r.URL.Query().Get("list-type") == "2" {
			if p := r.URL.Query().Get("prefix"); p != "Qwen3-0.6B/" {
				t.Errorf("prefix %q", p)
			}
			fmt.Fprint(w, `<ListBucketResult><IsTruncated>false</IsTruncated>`)
			for k, n := range objects {
				fmt.Fprintf(w, `<Contents><Key>%s</Key><Size>%d</Size></Contents>`, k, n)
			}
			fmt.Fprint(w, `</ListBucketResult>`)
			return
		}
		fmt.Fprint(w, strings.Repeat("x", objects[strings.TrimPrefix(r.URL.Path, "/models/")]))
	}))
	defer srv.Close()
	cfg := Config{Weights: hfmodel.NewWeightsCache(), TimeScale: 1}
	mounts := map[string]string{"/root/.cache/huggingface": "pvc:ns/s3w"}
	dir := "/root/.cache/huggingface/s3/models/Qwen3-0.6B"
	env := map[string]string{"HF_HOME": "/root/.cache/huggingface", "TQDM_MININTERVAL": "1", "AWS_ENDPOINT_URL": srv.URL,
		"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret"}
	fill := proc.Spec{Command: []string{"python3", "-c", "import boto3"}, Args: []string{"s3://models/Qwen3-0.6B", dir}, GPUs: -1,
		Mounts: mounts, Env: env, DownloadMBPerS: 0.0005} // 1207 bytes at 500 B/s: 2.4 s
	s, log, _ := vtStart(t, fill, cfg)
	text := func() string { return log.Render(proc.LogOptions{TailLines: -1}) }
	if st := vtExit(t, s, log); st.Code != 0 {
		t.Fatalf("fill exited %+v:\n%s", st, text())
	}
	if !strings.Contains(text(), "fill: s3://models/Qwen3-0.6B: 2 files, 1207 bytes") || !strings.Contains(text(), "fill: s3://models/Qwen3-0.6B 1207/1207 bytes") ||
		!strings.Contains(text(), "/1207 bytes, 500 bytes/s") || len(gets) != 3 {
		t.Fatalf("gets %v:\n%s", gets, text())
	}
	if !cfg.Weights.Has("pvc:ns/s3w", "dir:/s3/models/Qwen3-0.6B") {
		t.Fatal("the copied directory is not held on the volume")
	}
	serve := cfg
	serve.TimeScale = 0.01
	_, slog, url := vtStart(t, proc.Spec{Args: []string{dir}, Mounts: mounts, Env: map[string]string{"HF_HUB_OFFLINE": "1"}}, serve)
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	_ = slog
	other, olog, _ := vtStart(t, proc.Spec{Args: []string{"/root/.cache/huggingface/s3/models/other"}, Mounts: mounts}, serve)
	if st := vtExit(t, other, olog); st.Code == 0 || !strings.Contains(olog.Render(proc.LogOptions{TailLines: -1}), "Invalid repository ID or local directory specified") {
		t.Errorf("a directory not copied: %+v %q", st, vtLastLine(olog))
	}
	// the wrong key: the store's refusal, in botocore's words, ends the fill
	env2 := map[string]string{}
	for k, v := range env {
		env2[k] = v
	}
	env2["AWS_ACCESS_KEY_ID"] = "WRONG"
	fill.Env = env2
	bad, blog, _ := vtStart(t, fill, cfg)
	if st := vtExit(t, bad, blog); st.Code != 4 || vtLastLine(blog) != "fill: s3://models/Qwen3-0.6B refused: An error occurred (SignatureDoesNotMatch) when calling the ListObjectsV2 operation: The request signature we calculated does not match the signature you provided. Check your key and signing method." {
		t.Errorf("wrong key: %+v %q", st, vtLastLine(blog))
	}
}
