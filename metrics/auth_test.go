package metrics

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeAPI answers TokenReviews from users (token -> username) and SubjectAccessReviews from
// allowed (username -> may get /metrics), counting the calls.
func fakeAPI(users map[string]string, allowed map[string]bool) (*fake.Clientset, *int, *error) {
	c := fake.NewClientset()
	calls := 0
	var fail error
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if fail != nil {
			return true, nil, fail
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if u, ok := users[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: u, Groups: []string{"system:authenticated"}}}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		na := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = na != nil && na.Path == "/metrics" && na.Verb == "get" && allowed[sar.Spec.User]
		return true, sar, nil
	})
	return c, &calls, &fail
}

func TestAuthorizer(t *testing.T) {
	kube, calls, fail := fakeAPI(map[string]string{"good": "prometheus", "other": "someone"}, map[string]bool{"prometheus": true})
	a := NewAuthorizer(kube, time.Minute, 10*time.Second)
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	get := func(auth string) int {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"not a bearer token", "Basic Zm9vOmJhcg==", http.StatusUnauthorized},
		{"unknown token", "Bearer bad", http.StatusUnauthorized},
		{"authenticated, not authorized", "Bearer other", http.StatusForbidden},
		{"authorized", "Bearer good", http.StatusOK},
	} {
		if got := get(tc.auth); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}

	// Cached: no API call within the TTL, for granted and refused tokens alike.
	before := *calls
	if get("Bearer good") != http.StatusOK || get("Bearer other") != http.StatusForbidden || *calls != before {
		t.Fatalf("cached decisions made %d API calls", *calls-before)
	}
	// A refusal expires first: a new binding takes effect without waiting for the grant TTL.
	now = now.Add(20 * time.Second)
	before = *calls
	if get("Bearer good") != http.StatusOK || *calls != before {
		t.Fatal("a grant expired with the refusal TTL")
	}
	if get("Bearer other") != http.StatusForbidden || *calls != before+2 {
		t.Fatalf("refusal not reviewed again after its TTL (%d calls)", *calls-before)
	}
	// After the TTL the token is reviewed again; an API failure is a 500 and is not cached.
	now = now.Add(2 * time.Minute)
	*fail = errors.New("apiserver down")
	if got := get("Bearer good"); got != http.StatusInternalServerError {
		t.Fatalf("API down: status %d", got)
	}
	*fail = nil
	if got := get("Bearer good"); got != http.StatusOK {
		t.Fatalf("API back: status %d", got)
	}
}

func TestSelfSignedTLS(t *testing.T) {
	cfg, err := SelfSignedTLS("localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.TLS = cfg
	srv.StartTLS()
	defer srv.Close()
	tr := &http.Transport{TLSClientConfig: cfg.Clone()}
	tr.TLSClientConfig.InsecureSkipVerify = true // self-signed, as Prometheus with insecure_skip_verify
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 || !slices.ContainsFunc(resp.TLS.PeerCertificates[0].IPAddresses, func(ip net.IP) bool { return ip.String() == "127.0.0.1" }) {
		t.Fatalf("unexpected TLS state %+v", resp.TLS)
	}
}
