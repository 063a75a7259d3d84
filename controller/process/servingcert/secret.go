package servingcert

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// ManagedBy labels the Secret the metrics adapter issued.
const ManagedBy = "inferenceservice-metrics-adapter"

// Source is the Secret the pair is kept in.
type Source struct {
	Secrets         corev1client.SecretsGetter
	Namespace, Name string
	DNSNames        []string
	// Issue: the metrics adapter creates and renews the Secret; false, an external issuer
	// does (cert-manager) and the metrics adapter only reads it.
	Issue bool
	// Owner goes on a Secret the metrics adapter creates, so it is removed with the install.
	Owner *metav1.OwnerReference
	Now   func() time.Time
}

// Get returns the Secret's pair; issuing it when absent and renewing it when Check finds it
// due, where the metrics adapter is the issuer. action says which ("created", "renewed: why",
// "unchanged").
func (s Source) Get(ctx context.Context) (p Pair, action string, err error) {
	for attempt := 0; ; attempt++ {
		p, action, err = s.get(ctx)
		// Another replica created it first: read theirs, once.
		if !apierrors.IsAlreadyExists(err) || attempt > 0 {
			return p, action, err
		}
	}
}

func (s Source) get(ctx context.Context) (Pair, string, error) {
	c := s.Secrets.Secrets(s.Namespace)
	now := s.Now()
	sec, err := c.Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && s.Issue {
		p, err := Issue(Pair{}, now, s.DNSNames)
		if err != nil {
			return Pair{}, "", err
		}
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": ManagedBy}},
			Type: corev1.SecretTypeTLS,
			Data: toData(p),
		}
		if s.Owner != nil {
			sec.OwnerReferences = []metav1.OwnerReference{*s.Owner}
		}
		if _, err := c.Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			return Pair{}, "", fmt.Errorf("creating Secret %s/%s: %w", s.Namespace, s.Name, err)
		}
		return p, "created", nil
	}
	if err != nil {
		return Pair{}, "", fmt.Errorf("Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	p := fromData(sec.Data)
	if !s.Issue {
		if why := Valid(p, now, s.DNSNames); why != "" {
			return Pair{}, "", fmt.Errorf("Secret %s/%s, written by its issuer: %s", s.Namespace, s.Name, why)
		}
		return p, "unchanged", nil
	}
	why := Check(p, now, s.DNSNames)
	if why == "" {
		return p, "unchanged", nil
	}
	renewed, err := Issue(p, now, s.DNSNames)
	if err != nil {
		return Pair{}, "", err
	}
	sec = sec.DeepCopy()
	sec.Data = toData(renewed)
	// A conflict means another replica renewed it first: the next pass reads theirs.
	if _, err := c.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		return Pair{}, "", fmt.Errorf("renewing Secret %s/%s (%s): %w", s.Namespace, s.Name, why, err)
	}
	return renewed, "renewed: " + why, nil
}

func toData(p Pair) map[string][]byte {
	d := map[string][]byte{CAKey: p.CA, CertKey: p.Cert, KeyKey: p.Key}
	if len(p.CAKey) > 0 {
		d[CAKeyKey] = p.CAKey
	}
	return d
}

func fromData(d map[string][]byte) Pair {
	return Pair{CA: d[CAKey], CAKey: d[CAKeyKey], Cert: d[CertKey], Key: d[KeyKey]}
}

// WriteFiles puts p's certificate and key in dir as tls.crt and tls.key, each replaced
// atomically and only when it changed: the API server's serving certificate controller reloads
// them from there.
func WriteFiles(dir string, p Pair) (certFile, keyFile string, changed bool, err error) {
	certFile, keyFile = filepath.Join(dir, CertKey), filepath.Join(dir, KeyKey)
	// --cert-dir need not exist yet (the generic API server creates it only for a self-signed pair).
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", false, err
	}
	// The key first: a reader between the two renames sees the old certificate with the new
	// key, which does not load, and keeps serving the previous pair.
	for _, f := range []struct {
		path string
		data []byte
	}{{keyFile, p.Key}, {certFile, p.Cert}} {
		if old, err := os.ReadFile(f.path); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		tmp := f.path + ".tmp"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			return "", "", false, err
		}
		if err := os.Rename(tmp, f.path); err != nil {
			return "", "", false, err
		}
		changed = true
	}
	return certFile, keyFile, changed, nil
}
