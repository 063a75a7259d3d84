// An S3 server for the local cluster: gofakes3 (github.com/johannesboyne/gofakes3, its
// in-memory backend, path-style buckets) behind the Signature Version 4 check S3 makes, which
// gofakes3 does not: a request signed with an unknown key id or the wrong secret is refused
// with S3's own error codes, so a fill with a wrong Secret fails as it would on AWS or MinIO.
// It listens on a loopback address only, and is seeded from a directory: DIR/BUCKET/KEY.
//
//	s3 --listen 127.0.0.1:0 --credentials AKID:SECRET --seed DIR
//
// It prints "listening on http://ADDR" once it accepts connections.

package main

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

type credentialFlags map[string]string

func (c credentialFlags) String() string { return fmt.Sprint(len(c), " keys") }
func (c credentialFlags) Set(v string) error {
	id, secret, ok := strings.Cut(v, ":")
	if !ok || id == "" || secret == "" {
		return fmt.Errorf("want ACCESS_KEY_ID:SECRET")
	}
	c[id] = secret
	return nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (loopback only)")
	seed := flag.String("seed", "", "directory whose DIR/BUCKET/KEY files are the store's objects")
	creds := credentialFlags{}
	flag.Var(creds, "credentials", "ACCESS_KEY_ID:SECRET accepted (repeatable); none: every request is refused")
	flag.Parse()
	host, _, err := net.SplitHostPort(*listen)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		log.Fatalf("--listen %q: a loopback address only", *listen)
	}
	backend := s3mem.New()
	if *seed != "" {
		if err := load(backend, *seed); err != nil {
			log.Fatal(err)
		}
	}
	faker := gofakes3.New(backend)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: authorized(faker.Server(), creds), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}

// authorized passes a request on only when its SigV4 signature holds.
func authorized(next http.Handler, secrets map[string]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := verify(r, secrets, time.Now()); e != nil {
			log.Printf("%s %s: %s", r.Method, r.RequestURI, e.code)
			writeError(w, r, e)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// writeError is S3's XML error body, which botocore reads Code and Message from.
func writeError(w http.ResponseWriter, r *http.Request, e *s3Error) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	_ = xml.NewEncoder(&b).Encode(struct {
		XMLName  xml.Name `xml:"Error"`
		Code     string   `xml:"Code"`
		Message  string   `xml:"Message"`
		Resource string   `xml:"Resource"`
	}{Code: e.code, Message: e.message, Resource: r.URL.Path})
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(e.status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b.Bytes())
	}
}

// load makes a bucket of each directory of dir and an object of each file below it.
func load(backend gofakes3.Backend, dir string) error {
	buckets, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, bk := range buckets {
		if !bk.IsDir() {
			continue
		}
		root := filepath.Join(dir, bk.Name())
		if err := backend.CreateBucket(bk.Name()); err != nil {
			return err
		}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			_, err = backend.PutObject(bk.Name(), filepath.ToSlash(rel), map[string]string{}, bytes.NewReader(data), int64(len(data)), nil)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
