package soak

// The operators' ServiceAccount token, as a pod's projected token: a file their kubeconfig
// names (tokenFile, which client-go reads again at most once a minute, a 401 notwithstanding),
// bound to a Secret so that deleting the Secret revokes it. The token-rotation fault writes a
// new token into the file and revokes the old one at once: harsher than the kubelet's rotation,
// where the old token stays valid until it expires, so the operators are refused until their
// next read.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/example/inferenceservice-operator/test/testenv"
)

// tokens is the token file and the Secret its current token is bound to.
type tokens struct {
	path   string
	n      int
	secret string
}

// newTokens writes the first token and a kubeconfig of the operator's ServiceAccount that
// reads it from the file.
func newTokens(ctx context.Context, dir string) (*tokens, string, error) {
	tk := &tokens{path: filepath.Join(dir, "operator.token")}
	if _, err := tk.rotate(ctx); err != nil {
		return nil, "", err
	}
	kc, err := clientcmd.LoadFromFile(env.SAKubeconfig)
	if err != nil {
		return nil, "", err
	}
	for _, u := range kc.AuthInfos {
		u.Token, u.TokenFile = "", tk.path
	}
	path := filepath.Join(dir, "operator-tokenfile.kubeconfig")
	return tk, path, clientcmd.WriteToFile(*kc, path)
}

// rotate binds a new token to a new Secret and writes it over the file (a rename, as the
// kubelet's atomic writer does); it returns the Secret of the token it replaced.
func (tk *tokens) rotate(ctx context.Context) (string, error) {
	tk.n++
	name := fmt.Sprintf("soak-operator-token-%d", tk.n)
	var sec *corev1.Secret
	if err := retry(ctx, time.Minute, func() (err error) {
		sec, err = env.Kube.CoreV1().Secrets(testenv.SystemNamespace).Create(ctx,
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return "", err
	}
	exp := int64(6 * 3600)
	var tr *authenticationv1.TokenRequest
	if err := retry(ctx, time.Minute, func() (err error) {
		tr, err = env.Kube.CoreV1().ServiceAccounts(testenv.SystemNamespace).CreateToken(ctx, testenv.ServiceAccount,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp,
				BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: sec.Name, UID: sec.UID}}},
			metav1.CreateOptions{})
		return err
	}); err != nil {
		return "", err
	}
	tmp := tk.path + ".new"
	if err := os.WriteFile(tmp, []byte(tr.Status.Token), 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, tk.path); err != nil {
		return "", err
	}
	old := tk.secret
	tk.secret = name
	return old, nil
}

// rotateToken is the fault: a new token in the file, the old one revoked, then hold; it
// counts the requests the API server refused meanwhile (those made with the old token before
// client-go read the file again).
func (s *soakRun) rotateToken(ctx context.Context, hold time.Duration) (string, error) {
	began := time.Now()
	old, err := s.tokens.rotate(ctx)
	if err != nil {
		return "", err
	}
	if err := retry(ctx, time.Minute, func() error {
		return env.Kube.CoreV1().Secrets(testenv.SystemNamespace).Delete(ctx, old, metav1.DeleteOptions{})
	}); err != nil {
		return "", err
	}
	timer := time.NewTimer(hold) // the schedule's length, not a wait for state
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	refused := 0
	for _, r := range s.replicas {
		for _, q := range r.proxy.Requests() {
			if q.Code == http.StatusUnauthorized && !q.At.Before(began) {
				refused++
			}
		}
	}
	return fmt.Sprintf("token rotated (the old one revoked with its Secret %s); %d requests refused with the old token in %s", old, refused, hold), nil
}
