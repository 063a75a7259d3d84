// The operator's s3:// fill as the model's image runs it: `python3 -c` over boto3 (which
// vllm/vllm-openai ships as runai-model-streamer[s3]'s dependency), copying the objects under
// s3://BUCKET/PREFIX/ to a directory of the managed claim. It reaches the S3 endpoint the pod's
// environment names for real (AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL; botocore's own
// order), path-style as the fill asks botocore to address a custom endpoint, signs every request with SigV4
// from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for AWS_REGION, else AWS_DEFAULT_REGION,
// else us-east-1, and reads every byte; the store's refusals come back in botocore's words
// (`An error occurred (CODE) when calling the OPERATION operation: MESSAGE`). Its time on the
// volume's link and its progress lines are modelled as the hub fill's (hf_download.go), and
// what it copied is held on the volume under its path there, which a vLLM loading the
// directory then finds (run.go).

package vllm

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// s3Fill is the fill's command line: its source and the directory it copies to.
type s3Fill struct{ src, dest string }

// parseS3Fill reads `python3 -c SCRIPT s3://BUCKET/PREFIX DEST` where SCRIPT imports boto3.
func parseS3Fill(command, args []string) (s3Fill, bool) {
	full := append(append([]string(nil), command...), args...)
	if len(full) == 5 && strings.HasPrefix(base(full[0]), "python") && full[1] == "-c" && strings.Contains(full[2], "import boto3") &&
		strings.HasPrefix(full[3], "s3://") {
		return s3Fill{src: full[3], dest: full[4]}, true
	}
	return s3Fill{}, false
}

// s3Refusals are the error codes the fill ends on at once (exit 4): a retry gets the same.
var s3Refusals = map[string]bool{"InvalidAccessKeyId": true, "SignatureDoesNotMatch": true, "AccessDenied": true, "NoSuchBucket": true,
	"AllAccessDisabled": true, "InvalidBucketName": true, "ExpiredToken": true, "InvalidToken": true}

// s3Object is one object of a listing.
type s3Object struct {
	Key  string `xml:"Key"`
	Size int64  `xml:"Size"`
}

// runS3Fill is the fill's process.
func (s *Server) runS3Fill(d s3Fill) {
	sp := s.spec
	env := sp.Env
	bucket, prefix, _ := strings.Cut(strings.TrimPrefix(d.src, "s3://"), "/")
	prefix = strings.Trim(prefix, "/")
	endpoint := env["AWS_ENDPOINT_URL_S3"]
	if endpoint == "" {
		endpoint = env["AWS_ENDPOINT_URL"]
	}
	region := env["AWS_REGION"]
	if region == "" {
		region = env["AWS_DEFAULT_REGION"]
	}
	if region == "" {
		region = "us-east-1"
	}
	c := s3Client{endpoint: strings.TrimSuffix(endpoint, "/"), region: region, id: env["AWS_ACCESS_KEY_ID"], secret: env["AWS_SECRET_ACCESS_KEY"],
		http: &http.Client{Timeout: 30 * time.Second}}
	refuse := func(msg string) {
		s.log.Printf("fill: %s refused: %s", d.src, msg)
		s.life.Exit(proc.Exit{Code: 4, Reason: "Error"})
	}
	if c.id == "" || c.secret == "" {
		// botocore's credential chain found nothing: no Secret, no web identity token
		refuse("Unable to locate credentials")
		return
	}
	if c.endpoint == "" {
		// the local cluster has no route to AWS: botocore's connection error, retried by the Job
		s.failS3("botocore.exceptions.EndpointConnectionError", fmt.Sprintf(`Could not connect to the endpoint URL: "https://%s.s3.amazonaws.com/?list-type=2&prefix=%s&encoding-type=url"`, bucket, url.QueryEscape(prefix+"/")))
		return
	}
	listPrefix := ""
	if prefix != "" {
		listPrefix = prefix + "/"
	}
	var objs []s3Object
	token := ""
	for {
		q := url.Values{"list-type": {"2"}, "prefix": {listPrefix}, "encoding-type": {"url"}}
		if token != "" {
			q.Set("continuation-token", token)
		}
		var page struct {
			Contents              []s3Object `xml:"Contents"`
			IsTruncated           bool       `xml:"IsTruncated"`
			NextContinuationToken string     `xml:"NextContinuationToken"`
		}
		body, apiErr, err := c.get("/"+bucket, q)
		if err != nil {
			s.failS3("botocore.exceptions.EndpointConnectionError", fmt.Sprintf(`Could not connect to the endpoint URL: "%s/%s?%s"`, c.endpoint, bucket, q.Encode()))
			return
		}
		if apiErr != nil {
			msg := apiErr.message("ListObjectsV2")
			if s3Refusals[apiErr.Code] {
				refuse(msg)
			} else {
				s.failS3("botocore.exceptions.ClientError", msg)
			}
			return
		}
		if err := xml.Unmarshal(body, &page); err != nil {
			s.failS3("botocore.parsers.ResponseParserError", "Unable to parse response ("+err.Error()+")")
			return
		}
		for _, o := range page.Contents {
			if k, err := url.QueryUnescape(o.Key); err == nil { // encoding-type=url: boto3 decodes the keys
				o.Key = k
			}
			if !strings.HasSuffix(o.Key, "/") {
				objs = append(objs, o)
			}
		}
		if !page.IsTruncated || page.NextContinuationToken == "" {
			break
		}
		token = page.NextContinuationToken
	}
	if len(objs) == 0 {
		refuse("no objects under " + d.src + "/")
		return
	}
	var need int64
	for _, o := range objs {
		p := path.Clean(path.Join(d.dest, strings.TrimLeft(strings.TrimPrefix(o.Key, prefix), "/")))
		if !strings.HasPrefix(p, d.dest+"/") {
			refuse(fmt.Sprintf("the key %s would land outside %s", o.Key, d.dest))
			return
		}
		need += o.Size
	}
	mount, volume, _ := hfmodel.MountFor(sp.Mounts, d.dest)
	if room := sp.VolumeBytes; room > 0 && need > room {
		s.log.Printf("fill: %s needs %d bytes, more than the volume's %d bytes", d.src, need, room)
		s.life.Exit(proc.Exit{Code: 3, Reason: "Error"})
		return
	}
	s.log.Printf("fill: %s: %d files, %d bytes", d.src, len(objs), need)
	// every byte read from the store, so a wrong key or a short object shows
	for _, o := range objs {
		body, apiErr, err := c.get("/"+bucket+"/"+s3EscapePath(o.Key), nil)
		switch {
		case err != nil:
			s.failS3("botocore.exceptions.EndpointConnectionError", fmt.Sprintf(`Could not connect to the endpoint URL: "%s/%s/%s"`, c.endpoint, bucket, o.Key))
			return
		case apiErr != nil:
			s.failS3("botocore.exceptions.ClientError", apiErr.message("GetObject"))
			return
		case int64(len(body)) != o.Size:
			s.failS3("botocore.exceptions.IncompleteReadError", fmt.Sprintf("%d read, but total bytes expected is %d.", len(body), o.Size))
			return
		}
	}
	// the copy's time on the volume's link, its progress line every TQDM_MININTERVAL
	key := "dir:" + strings.TrimPrefix(d.dest, mount)
	bw := s.cfg.DownloadBandwidth
	if sp.DownloadMBPerS > 0 {
		bw = sp.DownloadMBPerS * 1e6
	}
	took := s.cfg.scaled(need, bw)
	every := time.Duration(float64(time.Second) * s.cfg.TimeScale * 5)
	if v, err := parseSeconds(env["TQDM_MININTERVAL"]); err == nil && v > 0 {
		every = time.Duration(v * s.cfg.TimeScale * float64(time.Second))
	}
	every = max(every, time.Second)
	start := time.Now()
	for time.Since(start) < took {
		if !s.life.Wait(min(every, took-time.Since(start))) {
			return
		}
		done := int64(float64(need) * float64(min(time.Since(start), took)) / float64(max(took, 1)))
		s.log.Printf("fill: %s %d/%d bytes, %.0f bytes/s", d.src, done, need, bw)
	}
	s.cfg.Weights.Store(volume, key, need)
	s.log.Printf("fill: %s %d/%d bytes, 0 bytes/s", d.src, need, need)
	s.life.Exit(proc.Exit{Code: 0, Reason: "Completed"})
}

// failS3 is an uncaught botocore exception: Python's traceback ends with it, exit 1 (the Job
// retries).
func (s *Server) failS3(exception, msg string) {
	s.log.Printf("Traceback (most recent call last):")
	s.log.Printf(`  File "<string>", line 13, in <module>`)
	s.log.Printf("%s: %s", exception, msg)
	s.life.Exit(proc.Exit{Code: 1, Reason: "Error"})
}

func parseSeconds(v string) (float64, error) {
	var f float64
	_, err := fmt.Sscanf(v, "%g", &f)
	return f, err
}

// s3APIError is S3's XML error body.
type s3APIError struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// message is botocore's ClientError text for the error on operation.
func (e *s3APIError) message(operation string) string {
	return fmt.Sprintf("An error occurred (%s) when calling the %s operation: %s", e.Code, operation, e.Message)
}

// s3Client signs GETs with SigV4 as botocore does over http: the payload's SHA-256 (of
// nothing) in x-amz-content-sha256, the host, that hash and x-amz-date signed.
type s3Client struct {
	endpoint, region, id, secret string
	http                         *http.Client
	now                          func() time.Time
}

const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// get is a signed GET of the escaped path with the query: the body, or S3's error.
func (c s3Client) get(escapedPath string, q url.Values) ([]byte, *s3APIError, error) {
	raw := c.endpoint + escapedPath
	if len(q) > 0 {
		raw += "?" + s3Query(q)
	}
	req, err := http.NewRequest(http.MethodGet, raw, nil)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	c.sign(req, now().UTC())
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<34))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode >= 300 {
		e := &s3APIError{}
		if xml.Unmarshal(body, e) != nil || e.Code == "" {
			e.Code, e.Message = fmt.Sprint(resp.StatusCode), http.StatusText(resp.StatusCode)
		}
		return nil, e, nil
	}
	return body, nil, nil
}

// sign adds SigV4's headers to req for the time t.
func (c s3Client) sign(req *http.Request, t time.Time) {
	date := t.Format("20060102T150405Z")
	day := date[:8]
	req.Header.Set("X-Amz-Date", date)
	if req.Header.Get("X-Amz-Content-Sha256") == "" {
		req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	}
	var names []string
	for k := range req.Header {
		names = append(names, strings.ToLower(k))
	}
	names = append(names, "host")
	sort.Strings(names)
	var canon strings.Builder
	canon.WriteString(req.Method + "\n" + req.URL.EscapedPath() + "\n" + s3CanonicalQuery(req.URL.RawQuery) + "\n")
	for _, h := range names {
		v := req.Header.Get(h)
		if h == "host" {
			v = req.URL.Host
		}
		canon.WriteString(h + ":" + strings.Join(strings.Fields(v), " ") + "\n")
	}
	canon.WriteString("\n" + strings.Join(names, ";") + "\n" + req.Header.Get("X-Amz-Content-Sha256"))
	sum := sha256.Sum256([]byte(canon.String()))
	scope := day + "/" + c.region + "/s3/aws4_request"
	toSign := "AWS4-HMAC-SHA256\n" + date + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	k := hmacSHA256([]byte("AWS4"+c.secret), day)
	for _, part := range []string{c.region, "s3", "aws4_request"} {
		k = hmacSHA256(k, part)
	}
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+c.id+"/"+scope+", SignedHeaders="+strings.Join(names, ";")+
		", Signature="+hex.EncodeToString(hmacSHA256(k, toSign)))
}

func hmacSHA256(key []byte, s string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(s))
	return h.Sum(nil)
}

// s3URIEncode is SigV4's UriEncode: all but A-Z a-z 0-9 - _ . ~ percent-encoded.
func s3URIEncode(s string, keepSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if 'A' <= ch && ch <= 'Z' || 'a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' || ch == '-' || ch == '_' || ch == '.' || ch == '~' || keepSlash && ch == '/' {
			b.WriteByte(ch)
		} else {
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}

// s3EscapePath is an object key in the path, encoded once as S3 wants it.
func s3EscapePath(key string) string { return s3URIEncode(key, true) }

// s3Query is the query in SigV4's canonical form, which is also what is sent.
func s3Query(q url.Values) string {
	var pairs []string
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, s3URIEncode(k, false)+"="+s3URIEncode(v, false))
		}
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

func s3CanonicalQuery(raw string) string {
	q, _ := url.ParseQuery(raw)
	return s3Query(q)
}
