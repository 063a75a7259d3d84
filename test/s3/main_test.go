package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// AWS's worked example of a signed GET (S3 API reference, "Signature Calculations for the
// Authorization Header", GET Object): the same secret, date and headers give its signature.
func TestSignatureAWSExample(t *testing.T) {
	r := httptest.NewRequest("GET", "/test.txt", nil)
	r.Host = "examplebucket.s3.amazonaws.com"
	r.Header.Set("Range", "bytes=0-9")
	r.Header.Set("X-Amz-Content-Sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
	r.Header.Set("X-Amz-Date", "20130524T000000Z")
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
	now := time.Date(2013, 5, 24, 0, 1, 0, 0, time.UTC)
	secrets := map[string]string{"AKIAIOSFODNN7EXAMPLE": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
	if e := verify(r, secrets, now); e != nil {
		t.Fatalf("AWS's example refused: %s", e.code)
	}
	secrets["AKIAIOSFODNN7EXAMPLE"] = "wrong"
	if e := verify(r, secrets, now); e != errSignature {
		t.Fatalf("wrong secret: %v", e)
	}
	if e := verify(r, secrets, now.Add(time.Hour)); e != errTooSkewed {
		t.Fatalf("an hour late: %v", e)
	}
}

// The AWS SDK for Go (v2, the version gofakes3's own tests pin) against the server: its
// signatures verify, listing and reading work; a wrong secret or key id is refused with
// S3's codes, and an unsigned request too.
func TestSDKAgainstServer(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("models"); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"architectures": ["Qwen3ForCausalLM"]}`)
	if _, err := backend.PutObject("models", "qwen3/config.json", map[string]string{}, bytes.NewReader(body), int64(len(body)), nil); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(authorized(gofakes3.New(backend).Server(), map[string]string{"AKIDLOCAL": "local-secret"}))
	defer srv.Close()
	client := func(id, secret string) *s3.Client {
		return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(id, secret, "")})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	good := client("AKIDLOCAL", "local-secret")
	list, err := good.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("models"), Prefix: aws.String("qwen3/")})
	if err != nil || len(list.Contents) != 1 || *list.Contents[0].Key != "qwen3/config.json" {
		t.Fatalf("list: %v %+v", err, list)
	}
	obj, err := good.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("qwen3/config.json")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(obj.Body)
	if !bytes.Equal(got, body) {
		t.Fatalf("get: %q", got)
	}
	for _, tc := range []struct{ id, secret, code string }{
		{"AKIDLOCAL", "wrong", "SignatureDoesNotMatch"},
		{"AKIDOTHER", "local-secret", "InvalidAccessKeyId"},
	} {
		_, err := client(tc.id, tc.secret).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("models")})
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != tc.code {
			t.Errorf("%s/%s: want %s, got %v", tc.id, tc.secret, tc.code, err)
		}
	}
	resp, err := http.Get(srv.URL + "/models?list-type=2")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "<Code>AccessDenied</Code>") {
		t.Fatalf("unsigned: %d %s", resp.StatusCode, b)
	}
}
