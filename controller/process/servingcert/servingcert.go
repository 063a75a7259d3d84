// Package servingcert is the project's one certificate authority helper: a serving certificate
// and the CA that signed it, issued, checked and renewed by the same pure code for both servers
// the API server calls back with a caBundle.
//
// The metrics adapter keeps its pair in a Secret of its namespace (Source), so every replica
// serves one certificate and its APIServices carry that CA as their caBundle: the aggregator
// verifies whom it sends users' identities to (with insecureSkipTLSVerify, anyone answering at
// the Service's address would receive them). The operator's conversion webhook keeps its pair in
// a directory (EnsureDir), one CA per replica, each merged into the CRD's caBundle (MergeBundle).
// Either may be issued by cert-manager instead, and is then only read.
package servingcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The Secret's keys, as cert-manager writes them.
const (
	CAKey   = "ca.crt"
	CertKey = corev1.TLSCertKey
	KeyKey  = corev1.TLSPrivateKeyKey
	// CAKeyKey holds the CA's key where the metrics adapter issues, so any replica can renew the
	// serving certificate under the same CA.
	CAKeyKey = "ca.key"
)

// Lifetimes: the CA outlives many serving certificates, so a renewal keeps the caBundle and
// replicas still serving the previous certificate stay verifiable.
const (
	CALife      = 10 * 365 * 24 * time.Hour
	CertLife    = 365 * 24 * time.Hour
	RenewBefore = 30 * 24 * time.Hour
)

// Pair is a serving certificate, its key and the CA that signed it, PEM-encoded; CAKey only
// where the metrics adapter is the issuer (an external issuer keeps its own).
type Pair struct {
	CA, CAKey, Cert, Key []byte
}

// DNSNames are the names the aggregator verifies the Service's certificate against
// (<service>.<namespace>.svc).
func DNSNames(namespace, service string) []string {
	return []string{service + "." + namespace + ".svc"}
}

// Check says why p should be renewed, as it cannot serve dnsNames (names or IP addresses)
// until now+RenewBefore, or
// "" when it can.
func Check(p Pair, now time.Time, dnsNames []string) string {
	if why := Valid(p, now, dnsNames); why != "" {
		return why
	}
	if leaf, _ := parseCert(p.Cert); leaf.NotAfter.Before(now.Add(RenewBefore)) {
		return fmt.Sprintf("expires %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return ""
}

// Valid says why p cannot serve dnsNames now (missing, unparsable, not signed by its CA, not
// for these names, expired), or "" when it can.
func Valid(p Pair, now time.Time, dnsNames []string) string {
	if len(p.CA) == 0 || len(p.Cert) == 0 || len(p.Key) == 0 {
		return "missing " + missing(p)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.CA) {
		return "ca.crt holds no certificate"
	}
	leaf, err := parseCert(p.Cert)
	if err != nil {
		return "tls.crt: " + err.Error()
	}
	if _, err := parseKey(p.Key); err != nil {
		return "tls.key: " + err.Error()
	}
	for _, name := range dnsNames {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: now}); err != nil {
			return err.Error()
		}
	}
	return ""
}

func missing(p Pair) string {
	var out []string
	for k, v := range map[string][]byte{CAKey: p.CA, CertKey: p.Cert, KeyKey: p.Key} {
		if len(v) == 0 {
			out = append(out, k)
		}
	}
	return fmt.Sprint(out)
}

// Issue returns a serving certificate for dnsNames signed by p's CA when that CA is good for the
// certificate's whole life, else by a new CA.
func Issue(p Pair, now time.Time, dnsNames []string) (Pair, error) {
	ca, caKey := reusableCA(p, now)
	out := Pair{CA: p.CA, CAKey: p.CAKey}
	if ca == nil {
		var err error
		if ca, caKey, out.CA, out.CAKey, err = newCA(now); err != nil {
			return Pair{}, err
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		NotBefore:    now.Add(-time.Hour), // clocks of other nodes may run behind
		NotAfter:     now.Add(CertLife),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	// A loopback address (a webhook the API server calls by URL) is an IP SAN, not a name.
	for _, h := range dnsNames {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return Pair{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	out.Cert = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	out.Key = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return out, nil
}

// reusableCA is p's CA and key when both parse and the CA outlives a new certificate.
func reusableCA(p Pair, now time.Time) (*x509.Certificate, any) {
	ca, err := parseCert(p.CA)
	if err != nil || !ca.IsCA || ca.NotAfter.Before(now.Add(CertLife)) {
		return nil, nil
	}
	key, err := parseKey(p.CAKey)
	if err != nil {
		return nil, nil
	}
	return ca, key
}

func newCA(now time.Time) (ca *x509.Certificate, key *ecdsa.PrivateKey, caPEM, keyPEM []byte, err error) {
	if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("inferenceservice-operator-ca@%d", now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CALife),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if ca, err = x509.ParseCertificate(der); err != nil {
		return nil, nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return ca, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}

func parseCert(b []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

func parseKey(b []byte) (any, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM key")
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	return x509.ParsePKCS1PrivateKey(block.Bytes)
}
