package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the paths of every credential the control plane uses. All of
// them live under <data-dir>/pki and are created once, so a restart on the
// same data directory keeps the CA, the client certificates and the
// ServiceAccount signing key (tokens issued before a restart stay valid).
type pki struct {
	dir          string
	caCert       string
	caKey        string
	servingCert  string
	servingKey   string
	saKey        string // RSA private key, signs ServiceAccount tokens
	saPub        string
	caCertParsed *x509.Certificate
	caSigner     crypto.Signer
}

// client identities: file stem -> (CN, O).
var clientIdentities = []struct{ stem, cn, org string }{
	{"admin", "kubernetes-admin", "system:masters"},
	{"controller-manager", "system:kube-controller-manager", "system:masters"},
	{"scheduler", "system:kube-scheduler", "system:masters"},
	{"kubelet", "system:node:localcluster-fake-kubelet", "system:masters"},
	// The kube-apiserver's client certificate for the kubelet API (kubectl logs).
	{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"},
}

func ensurePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{
		dir:         dir,
		caCert:      filepath.Join(dir, "ca.crt"),
		caKey:       filepath.Join(dir, "ca.key"),
		servingCert: filepath.Join(dir, "apiserver.crt"),
		servingKey:  filepath.Join(dir, "apiserver.key"),
		saKey:       filepath.Join(dir, "sa.key"),
		saPub:       filepath.Join(dir, "sa.pub"),
	}
	if !exists(p.caCert) || !exists(p.caKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber:          serial(),
			Subject:               pkix.Name{CommonName: "localcluster-ca"},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			return nil, err
		}
		if err := writeKey(p.caKey, key); err != nil {
			return nil, err
		}
		if err := writeCert(p.caCert, der); err != nil {
			return nil, err
		}
	}
	var err error
	if p.caCertParsed, p.caSigner, err = loadPair(p.caCert, p.caKey); err != nil {
		return nil, err
	}
	if !exists(p.servingCert) || !exists(p.servingKey) {
		ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}
		dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
		if err := p.issue(p.servingCert, p.servingKey, "kube-apiserver", "", dns, ips, x509.ExtKeyUsageServerAuth); err != nil {
			return nil, err
		}
	}
	for _, id := range clientIdentities {
		crt, key := p.clientPaths(id.stem)
		if exists(crt) && exists(key) {
			continue
		}
		if err := p.issue(crt, key, id.cn, id.org, nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
			return nil, err
		}
	}
	if !exists(p.saKey) || !exists(p.saPub) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		if err := writeKey(p.saKey, key); err != nil {
			return nil, err
		}
		pub, err := x509.MarshalPKIXPublicKey(key.Public())
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(p.saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// kubeletServing issues the kubelet API's serving certificate for the node addresses, in
// memory: the node count (so the addresses) may change between runs.
func (p *pki) kubeletServing(ips []net.IP) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "localcluster-fake-kubelet"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCertParsed, key.Public(), p.caSigner)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func (p *pki) clientPaths(stem string) (string, string) {
	return filepath.Join(p.dir, stem+".crt"), filepath.Join(p.dir, stem+".key")
}

func (p *pki) issue(certPath, keyPath, cn, org string, dns []string, ips []net.IP, usage x509.ExtKeyUsage) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	subj := pkix.Name{CommonName: cn}
	if org != "" {
		subj.Organization = []string{org}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subj,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCertParsed, key.Public(), p.caSigner)
	if err != nil {
		return err
	}
	if err := writeKey(keyPath, key); err != nil {
		return err
	}
	return writeCert(certPath, der)
}

// kubeconfig renders a kubeconfig with embedded client certificate data.
func (p *pki) kubeconfig(server, stem string) ([]byte, error) {
	ca, err := os.ReadFile(p.caCert)
	if err != nil {
		return nil, err
	}
	crtPath, keyPath := p.clientPaths(stem)
	crt, err := os.ReadFile(crtPath)
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	b64 := base64.StdEncoding.EncodeToString
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: localcluster
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: localcluster
  context:
    cluster: localcluster
    user: %s
current-context: localcluster
`, server, b64(ca), stem, b64(crt), b64(key), stem)), nil
}

func loadPair(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	cb, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	blk, _ := pem.Decode(cb)
	if blk == nil {
		return nil, nil, fmt.Errorf("%s: no PEM data", certPath)
	}
	crt, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	kblk, _ := pem.Decode(kb)
	if kblk == nil {
		return nil, nil, fmt.Errorf("%s: no PEM data", keyPath)
	}
	k, err := x509.ParseECPrivateKey(kblk.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return crt, k, nil
}

func writeCert(path string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
}

func writeKey(path string, key any) error {
	var blk *pem.Block
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return err
		}
		blk = &pem.Block{Type: "EC PRIVATE KEY", Bytes: b}
	case *rsa.PrivateKey:
		blk = &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}
	default:
		return fmt.Errorf("unsupported key type %T", key)
	}
	return os.WriteFile(path, pem.EncodeToMemory(blk), 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n.Add(n, big.NewInt(1))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
