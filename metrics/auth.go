package metrics

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
)

// maxCachedDecisions bounds the decision cache; past it the cache starts over.
const maxCachedDecisions = 1024

// Authorizer guards an endpoint the way kube-rbac-proxy and controller-runtime's secure metrics
// do: the bearer token is authenticated with a TokenReview and the user authorized with a
// SubjectAccessReview on the non-resource URL (verb get), so Prometheus needs a ClusterRole with
// nonResourceURLs: [/metrics], verbs: [get]. Decisions are cached by token hash: grants for
// one TTL, refusals for a shorter one so a new RoleBinding takes effect soon.
type Authorizer struct {
	kube              kubernetes.Interface
	allowTTL, denyTTL time.Duration
	now               func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]decision
}

type decision struct {
	status  int // http.StatusOK, StatusUnauthorized or StatusForbidden
	user    string
	expires time.Time
}

// NewAuthorizer returns an Authorizer calling the API server through kube, caching grants for
// allowTTL and refusals for denyTTL.
func NewAuthorizer(kube kubernetes.Interface, allowTTL, denyTTL time.Duration) *Authorizer {
	return &Authorizer{kube: kube, allowTTL: allowTTL, denyTTL: denyTTL, now: time.Now, cache: map[[32]byte]decision{}}
}

// Wrap serves h only to requests whose bearer token may get the requested path.
func (a *Authorizer) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		d, err := a.decide(r.Context(), token, r.URL.Path)
		if err != nil {
			klog.ErrorS(err, "Cannot review a metrics request")
			http.Error(w, "Internal Server Error: cannot review the token", http.StatusInternalServerError)
			return
		}
		switch d.status {
		case http.StatusOK:
			h.ServeHTTP(w, r)
		case http.StatusForbidden:
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not get %s", d.user, r.URL.Path), d.status)
		default:
			http.Error(w, "Unauthorized: invalid token", d.status)
		}
	})
}

func (a *Authorizer) decide(ctx context.Context, token, path string) (decision, error) {
	key := sha256.Sum256([]byte(path + "\x00" + token))
	now := a.now()
	a.mu.Lock()
	d, ok := a.cache[key]
	a.mu.Unlock()
	if ok && now.Before(d.expires) {
		return d, nil
	}
	d, err := a.review(ctx, token, path)
	if err != nil {
		return d, err // API errors are not cached: the next scrape retries
	}
	d.expires = now.Add(a.denyTTL)
	if d.status == http.StatusOK {
		d.expires = now.Add(a.allowTTL)
	}
	a.mu.Lock()
	if len(a.cache) >= maxCachedDecisions {
		a.cache = map[[32]byte]decision{}
	}
	a.cache[key] = d
	a.mu.Unlock()
	return d, nil
}

func (a *Authorizer) review(ctx context.Context, token, path string) (decision, error) {
	tr, err := a.kube.AuthenticationV1().TokenReviews().Create(ctx,
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("token review: %w", err)
	}
	if !tr.Status.Authenticated {
		return decision{status: http.StatusUnauthorized}, nil
	}
	u := tr.Status.User
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: "get"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("subject access review: %w", err)
	}
	if !sar.Status.Allowed {
		return decision{status: http.StatusForbidden, user: u.Username}, nil
	}
	return decision{status: http.StatusOK, user: u.Username}, nil
}

// SelfSignedTLS returns a TLS configuration with a fresh self-signed certificate for hosts,
// for a metrics endpoint started without a certificate (Prometheus then scrapes with
// insecure_skip_verify, or mount a real certificate).
func SelfSignedTLS(hosts ...string) (*tls.Config, error) {
	var ips []net.IP
	var names []string
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			names = append(names, h)
		}
	}
	// client-go's helper: a throwaway CA and a serving certificate it signs, valid a year.
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("inferenceservice-operator-metrics", ips, names)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}, nil
}
