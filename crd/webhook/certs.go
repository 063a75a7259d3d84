package webhook

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Files written into the certificate directory.
const (
	CAFile   = "ca.crt"
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

const (
	certValidity = 365 * 24 * time.Hour
	// renewBefore: certificates closer than this to expiry are replaced at start.
	renewBefore = 30 * 24 * time.Hour
)

// Certs is the serving certificate and the CA that signed it.
type Certs struct {
	CAPEM []byte
	Cert  tls.Certificate
}

// TLSConfig serves Cert.
func (c *Certs) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{c.Cert}}
}

// EnsureCerts reuses the CA and serving certificate in dir when they are valid for hosts for
// at least 30 more days, and otherwise generates a new CA and certificate into dir.
func EnsureCerts(dir string, hosts []string, now time.Time) (*Certs, error) {
	if c, err := loadCerts(dir, hosts, now); err == nil {
		return c, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caPEM, certPEM, keyPEM, err := generate(hosts, now)
	if err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{CAFile: caPEM, CertFile: certPEM, KeyFile: keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &Certs{CAPEM: caPEM, Cert: cert}, nil
}

func loadCerts(dir string, hosts []string, now time.Time) (*Certs, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, err
	}
	if now.Add(renewBefore).After(leaf.NotAfter) {
		return nil, errors.New("serving certificate expires soon")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate")
	}
	for _, h := range hosts {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: h, CurrentTime: now}); err != nil {
			return nil, err
		}
	}
	return &Certs{CAPEM: caPEM, Cert: cert}, nil
}

func generate(hosts []string, now time.Time) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("inferenceservice-operator-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "inferenceservice-operator-webhook"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// maxBundleCAs bounds the caBundle: each replica of the operator has its own CA, and all of
// them must be trusted while they serve.
const maxBundleCAs = 4

// MergeBundle returns bundle with ca added (when missing), expired or unreadable certificates
// dropped and at most maxBundleCAs kept, newest last; ca is always kept.
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
	if len(keep) > maxBundleCAs-1 {
		keep = keep[len(keep)-(maxBundleCAs-1):]
	}
	return bytes.Join(append(keep, ca), nil)
}
