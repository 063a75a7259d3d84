package servingcert

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var (
	t0    = time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	names = DNSNames("my-ns", "inferenceservice-metrics-adapter")
)

func issued(t *testing.T, p Pair, now time.Time, dns []string) Pair {
	t.Helper()
	out, err := Issue(p, now, dns)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheck(t *testing.T) {
	good := issued(t, Pair{}, t0, names)
	other := issued(t, Pair{}, t0, names)
	for _, tc := range []struct {
		name string
		p    Pair
		now  time.Time
		dns  []string
		want string // a substring of why; "" for fit
	}{
		{"fresh", good, t0, names, ""},
		{"within the renewal window", good, t0.Add(CertLife - RenewBefore + time.Hour), names, "expires"},
		{"expired", good, t0.Add(CertLife + time.Hour), names, "expired"},
		{"another namespace's name", good, t0, DNSNames("inferenceservice-system", "inferenceservice-metrics-adapter"), "inferenceservice-system"},
		{"signed by another CA", Pair{CA: other.CA, Cert: good.Cert, Key: good.Key}, t0, names, "unknown authority"},
		{"no key", Pair{CA: good.CA, Cert: good.Cert}, t0, names, "missing [tls.key]"},
		{"garbage certificate", Pair{CA: good.CA, Cert: []byte("x"), Key: good.Key}, t0, names, "tls.crt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(tc.p, tc.now, tc.dns)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Check = %q, want %q", got, tc.want)
			}
		})
	}
}

// A renewal keeps a CA that outlives the new certificate (the caBundle stays), and replaces
// one that does not.
func TestIssueKeepsTheCA(t *testing.T) {
	first := issued(t, Pair{}, t0, names)
	renewed := issued(t, first, t0.Add(CertLife-RenewBefore), names)
	if !bytes.Equal(renewed.CA, first.CA) || bytes.Equal(renewed.Cert, first.Cert) {
		t.Fatal("a renewal within the CA's life changed the CA or kept the certificate")
	}
	if why := Check(renewed, t0.Add(CertLife-RenewBefore), names); why != "" {
		t.Fatalf("renewed pair: %s", why)
	}
	late := t0.Add(CALife - CertLife + time.Hour)
	fresh := issued(t, first, late, names)
	if bytes.Equal(fresh.CA, first.CA) {
		t.Fatal("a CA expiring within the new certificate's life was kept")
	}
	if why := Check(fresh, late, names); why != "" {
		t.Fatalf("pair under a new CA: %s", why)
	}
}

func source(c *fake.Clientset, issue bool, now time.Time) Source {
	return Source{Secrets: c.CoreV1(), Namespace: "my-ns", Name: "tls", DNSNames: names, Issue: issue,
		Owner: &metav1.OwnerReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "inferenceservice-metrics-adapter", UID: "u1"},
		Now:   func() time.Time { return now }}
}

func writes(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		if a.GetVerb() != "get" {
			out = append(out, a.GetVerb())
		}
	}
	return out
}

func TestSourceIssuesOnceThenReads(t *testing.T) {
	c := fake.NewClientset()
	p, action, err := source(c, true, t0).Get(context.Background())
	if err != nil || action != "created" {
		t.Fatalf("first Get: %s, %v", action, err)
	}
	sec, err := c.CoreV1().Secrets("my-ns").Get(context.Background(), "tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != "u1" || sec.Type != corev1.SecretTypeTLS {
		t.Fatalf("Secret owners %v type %s", sec.OwnerReferences, sec.Type)
	}
	c.ClearActions()
	again, action, err := source(c, true, t0.Add(time.Hour)).Get(context.Background())
	if err != nil || action != "unchanged" || !bytes.Equal(again.Cert, p.Cert) {
		t.Fatalf("second Get: %s, %v", action, err)
	}
	if w := writes(c); len(w) != 0 {
		t.Fatalf("a fit Secret was written: %v", w)
	}
	// Due for renewal: a new certificate under the same CA, written back.
	renewed, action, err := source(c, true, t0.Add(CertLife-RenewBefore+time.Hour)).Get(context.Background())
	if err != nil || !strings.HasPrefix(action, "renewed: expires") || !bytes.Equal(renewed.CA, p.CA) || bytes.Equal(renewed.Cert, p.Cert) {
		t.Fatalf("Get when due: %s, %v", action, err)
	}
	if w := writes(c); len(w) != 1 || w[0] != "update" {
		t.Fatalf("renewal wrote %v, want one update", w)
	}
}

// Two replicas start together: the one whose create loses reads the winner's Secret.
func TestSourceCreateRaceReadsTheWinner(t *testing.T) {
	c := fake.NewClientset()
	winner := issued(t, Pair{}, t0, names)
	c.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: "my-ns"}, Data: toData(winner)}
		if err := c.Tracker().Add(obj); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, "tls")
	})
	p, action, err := source(c, true, t0).Get(context.Background())
	if err != nil || action != "unchanged" || !bytes.Equal(p.Cert, winner.Cert) {
		t.Fatalf("Get after a lost create: %s, %v", action, err)
	}
}

// An external issuer's Secret is read, never written; absent or unfit, it is an error.
func TestSourceExternalIssuer(t *testing.T) {
	c := fake.NewClientset()
	if _, _, err := source(c, false, t0).Get(context.Background()); err == nil {
		t.Fatal("no error for a Secret its issuer has not written")
	}
	good := issued(t, Pair{}, t0, names)
	if _, err := c.CoreV1().Secrets("my-ns").Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: "my-ns"},
		Data: map[string][]byte{CAKey: good.CA, CertKey: good.Cert, KeyKey: good.Key}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.ClearActions()
	// Within the renewal window it still serves: renewing is the issuer's work.
	if _, action, err := source(c, false, t0.Add(CertLife-RenewBefore+time.Hour)).Get(context.Background()); err != nil || action != "unchanged" {
		t.Fatalf("Get of the issuer's Secret: %s, %v", action, err)
	}
	if _, _, err := source(c, false, t0.Add(CertLife+time.Hour)).Get(context.Background()); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired external certificate: %v", err)
	}
	if w := writes(c); len(w) != 0 {
		t.Fatalf("the issuer's Secret was written: %v", w)
	}
}

func TestWriteFilesOnlyOnChange(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs") // not made yet, as --cert-dir on a first start
	p := issued(t, Pair{}, t0, names)
	certFile, keyFile, changed, err := WriteFiles(dir, p)
	if err != nil || !changed {
		t.Fatalf("first write: %v, changed %v", err, changed)
	}
	if b, _ := os.ReadFile(certFile); !bytes.Equal(b, p.Cert) {
		t.Fatal("tls.crt differs")
	}
	if b, _ := os.ReadFile(keyFile); !bytes.Equal(b, p.Key) || filepath.Base(keyFile) != "tls.key" {
		t.Fatal("tls.key differs")
	}
	if _, _, changed, err := WriteFiles(dir, p); err != nil || changed {
		t.Fatalf("same pair again: %v, changed %v", err, changed)
	}
}
