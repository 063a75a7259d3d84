// Signature Version 4 as S3 checks it on a request signed in its Authorization header
// (AWS's "Authenticating Requests: Using the Authorization Header"): the canonical request
// from the method, the path as sent, the sorted query, the signed headers and the payload
// hash header; the string to sign over the scope; the key derived from the secret, the date,
// the region and "s3". A refusal is S3's error code and message, as botocore prints them.

package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// s3Error is an S3 error response: its HTTP status, Code and Message.
type s3Error struct {
	status        int
	code, message string
}

var (
	errAccessDenied   = &s3Error{http.StatusForbidden, "AccessDenied", "Access Denied"}
	errInvalidKey     = &s3Error{http.StatusForbidden, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."}
	errSignature      = &s3Error{http.StatusForbidden, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your key and signing method."}
	errAuthHeader     = &s3Error{http.StatusBadRequest, "AuthorizationHeaderMalformed", "The authorization header is malformed."}
	errTooSkewed      = &s3Error{http.StatusForbidden, "RequestTimeTooSkewed", "The difference between the request time and the current time is too large."}
	errNoContentHash  = &s3Error{http.StatusBadRequest, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256"}
	errPresignRefused = &s3Error{http.StatusForbidden, "AccessDenied", "Query-string authentication is not served by this store."}
)

// maxSkew is S3's: a request dated more than 15 minutes from the server's clock is refused.
const maxSkew = 15 * time.Minute

// verify checks r's signature against the secrets by access key id; nil when it holds.
func verify(r *http.Request, secrets map[string]string, now time.Time) *s3Error {
	if r.URL.Query().Has("X-Amz-Signature") {
		return errPresignRefused
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return errAccessDenied
	}
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return errAuthHeader
	}
	var cred, signed, sig string
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			sig = v
		}
	}
	scope := strings.Split(cred, "/")
	if len(scope) != 5 || scope[3] != "s3" || scope[4] != "aws4_request" || signed == "" || sig == "" {
		return errAuthHeader
	}
	secret, ok := secrets[scope[0]]
	if !ok {
		return errInvalidKey
	}
	date := r.Header.Get("X-Amz-Date")
	t, err := time.Parse("20060102T150405Z", date)
	if err != nil || !strings.HasPrefix(date, scope[1]) {
		return errAuthHeader
	}
	if d := now.Sub(t); d > maxSkew || d < -maxSkew {
		return errTooSkewed
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		return errNoContentHash
	}
	want := signature(secret, scope[1], scope[2], date, canonicalRequest(r, strings.Split(signed, ";"), payload))
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return errSignature
	}
	return nil
}

// canonicalRequest is SigV4's canonical form of r over the signed headers (lower case, sorted
// as sent). The path is the one on the wire, which S3 does not encode twice.
func canonicalRequest(r *http.Request, signed []string, payload string) string {
	path, query, _ := strings.Cut(r.RequestURI, "?")
	if path == "" || !strings.HasPrefix(path, "/") { // an absolute-form target
		path, query = r.URL.EscapedPath(), r.URL.RawQuery
	}
	var b strings.Builder
	b.WriteString(r.Method + "\n" + path + "\n" + canonicalQuery(query) + "\n")
	for _, h := range signed {
		v := r.Header.Values(h)
		if h == "host" {
			v = []string{r.Host}
		}
		for i := range v {
			v[i] = strings.Join(strings.Fields(v[i]), " ")
		}
		b.WriteString(h + ":" + strings.Join(v, ",") + "\n")
	}
	b.WriteString("\n" + strings.Join(signed, ";") + "\n" + payload)
	return b.String()
}

// canonicalQuery is the query's pairs URI-encoded (RFC 3986, space as %20) and sorted.
func canonicalQuery(raw string) string {
	vals, _ := url.ParseQuery(raw)
	var pairs []string
	for k, vs := range vals {
		for _, v := range vs {
			pairs = append(pairs, uriEncode(k)+"="+uriEncode(v))
		}
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

// uriEncode is SigV4's UriEncode: every byte but A-Z a-z 0-9 - _ . ~ as %XY.
func uriEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}

// signature is the hex HMAC of the string to sign under the key derived for the day and region.
func signature(secret, day, region, date, canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + date + "\n" + day + "/" + region + "/s3/aws4_request\n" + hex.EncodeToString(sum[:])
	k := mac([]byte("AWS4"+secret), day)
	k = mac(k, region)
	k = mac(k, "s3")
	k = mac(k, "aws4_request")
	return hex.EncodeToString(mac(k, toSign))
}

func mac(key []byte, s string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(s))
	return h.Sum(nil)
}
