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
	// The aggregation layer's own trust chain, apart from the cluster CA as on a kubeadm
	// cluster: an aggregated API server trusts X-Remote-User only from a client certificate
	// this CA signed (the request-header CA), so no ordinary client can claim a user that way.
	frontProxyCACert     string
	frontProxyCAKey      string
	frontProxyClientCert string // CN front-proxy-client: the kube-apiserver's identity when it proxies
	frontProxyClientKey  string
}

// frontProxyClientCN is the front-proxy client certificate's CN, the one name aggregated
// API servers accept it under (--requestheader-allowed-names).
const frontProxyClientCN = "front-proxy-client"

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
		dir:                  dir,
		caCert:               filepath.Join(dir, "ca.crt"),
		caKey:                filepath.Join(dir, "ca.key"),
		servingCert:          filepath.Join(dir, "apiserver.crt"),
		servingKey:           filepath.Join(dir, "apiserver.key"),
		saKey:                filepath.Join(dir, "sa.key"),
		saPub:                filepath.Join(dir, "sa.pub"),
		frontProxyCACert:     filepath.Join(dir, "front-proxy-ca.crt"),
		frontProxyCAKey:      filepath.Join(dir, "front-proxy-ca.key"),
		frontProxyClientCert: filepath.Join(dir, "front-proxy-client.crt"),
		frontProxyClientKey:  filepath.Join(dir, "front-proxy-client.key"),
	}
	var err error
	if p.caCertParsed, p.caSigner, err = ensureCA(p.caCert, p.caKey, "localcluster-ca"); err != nil {
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
	// Created when missing, so a data directory from before the front proxy gains it on restart.
	fpCA, fpSigner, err := ensureCA(p.frontProxyCACert, p.frontProxyCAKey, "localcluster-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	if !exists(p.frontProxyClientCert) || !exists(p.frontProxyClientKey) {
		if err := issueBy(fpCA, fpSigner, p.frontProxyClientCert, p.frontProxyClientKey, frontProxyClientCN, "", nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
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

// aggregatorArgs are the kube-apiserver flags a kubeadm cluster sets for its aggregation
// layer: the front-proxy client certificate it presents to aggregated API servers, and the
// request-header settings it publishes in kube-system/extension-apiserver-authentication,
// which those servers read to trust that certificate's X-Remote-* headers.
func (p *pki) aggregatorArgs() []string {
	return []string{
		"--requestheader-client-ca-file=" + p.frontProxyCACert,
		"--requestheader-allowed-names=" + frontProxyClientCN,
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--proxy-client-cert-file=" + p.frontProxyClientCert,
		"--proxy-client-key-file=" + p.frontProxyClientKey,
	}
}

// ensureCA loads the self-signed CA at certPath/keyPath, creating it first when either is missing.
func ensureCA(certPath, keyPath, cn string) (*x509.Certificate, crypto.Signer, error) {
	if !exists(certPath) || !exists(keyPath) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber:          serial(),
			Subject:               pkix.Name{CommonName: cn},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			return nil, nil, err
		}
		if err := writeKey(keyPath, key); err != nil {
			return nil, nil, err
		}
		if err := writeCert(certPath, der); err != nil {
			return nil, nil, err
		}
	}
	return loadPair(certPath, keyPath)
}

func (p *pki) issue(certPath, keyPath, cn, org string, dns []string, ips []net.IP, usage x509.ExtKeyUsage) error {
	return issueBy(p.caCertParsed, p.caSigner, certPath, keyPath, cn, org, dns, ips, usage)
}

// issueBy writes a new key and a certificate for it signed by ca.
func issueBy(ca *x509.Certificate, caSigner crypto.Signer, certPath, keyPath, cn, org string, dns []string, ips []net.IP, usage x509.ExtKeyUsage) error {
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caSigner)
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
