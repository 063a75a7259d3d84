package servingcert

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The files of a certificate directory (EnsureDir), named as the Secret's keys are.
const (
	CAFile    = CAKey
	CAKeyFile = CAKeyKey
	CertFile  = CertKey
	KeyFile   = KeyKey
)

// EnsureDir returns the pair in dir when it serves hosts (DNS names or IP addresses) for at
// least RenewBefore more; otherwise it issues one (under dir's CA while that CA outlives the new
// certificate, else a new CA) and writes it there. A pod's emptyDir survives its containers'
// restarts, so a restarted server keeps the CA already in the caBundle.
func EnsureDir(dir string, hosts []string, now time.Time) (Pair, error) {
	var p Pair
	for _, f := range []struct {
		name string
		into *[]byte
	}{{CAFile, &p.CA}, {CAKeyFile, &p.CAKey}, {CertFile, &p.Cert}, {KeyFile, &p.Key}} {
		// A missing file is a missing part, which Check reports.
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil && !os.IsNotExist(err) {
			return Pair{}, err
		}
		*f.into = b
	}
	if Check(p, now, hosts) == "" {
		return p, nil
	}
	p, err := Issue(p, now, hosts)
	if err != nil {
		return Pair{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Pair{}, err
	}
	// The CA and its key first: a reader that finds the new tls.crt finds the CA it chains to.
	for _, f := range []struct {
		name string
		data []byte
	}{{CAFile, p.CA}, {CAKeyFile, p.CAKey}, {KeyFile, p.Key}, {CertFile, p.Cert}} {
		tmp := filepath.Join(dir, f.name+".tmp")
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			return Pair{}, err
		}
		if err := os.Rename(tmp, filepath.Join(dir, f.name)); err != nil {
			return Pair{}, err
		}
	}
	return p, nil
}

// TLSConfig serves p's certificate (TLS 1.2 and later).
func (p Pair) TLSConfig() (*tls.Config, error) {
	cert, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

// MaxBundleCAs bounds a caBundle that MergeBundle grows: each replica of a server that issues
// its own CA (the conversion webhook) adds one, and all of them must be trusted while they
// serve.
const MaxBundleCAs = 4

// MergeBundle returns bundle with ca added (when missing), expired or unreadable certificates
// dropped and at most MaxBundleCAs kept, newest last; ca is always kept.
func MergeBundle(bundle, ca []byte, now time.Time) []byte {
	var keep [][]byte
	rest := bundle
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if b.Type != "CERTIFICATE" || err != nil || now.After(c.NotAfter) {
			continue
		}
		keep = append(keep, pem.EncodeToMemory(b))
	}
	keep = slices.DeleteFunc(keep, func(p []byte) bool { return bytes.Equal(p, ca) })
	if len(keep) > MaxBundleCAs-1 {
		keep = keep[len(keep)-(MaxBundleCAs-1):]
	}
	return bytes.Join(append(keep, ca), nil)
}
