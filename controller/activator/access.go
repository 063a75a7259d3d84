package activator

// Who may ask for what (issue 49): the activator is shared by every namespace's models, so
// before it holds, reads or records anything it checks that the request names a model it
// serves, on a path that model's route forwards, named the way this caller may name it. Pure:
// the Catalog's lookups are the only state, and they come from caches.

import (
	"fmt"
	"net"
	"net/netip"
	"path"
	"strings"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// Catalog says which models the activator serves: an InferenceService at minReplicas 0 whose
// Service the operator controls (Models is the informer-backed one).
type Catalog interface {
	Serves(Key) bool
}

// Denial is why a request was refused before anything was held or read; the values of
// activator_denied_total's reason label.
type Denial string

const (
	// DenyNoModel: no model in the request, or one the Catalog does not serve.
	DenyNoModel Denial = "unknown_model"
	// DenyPath: a path the model's route does not forward (reconcile.InferencePaths).
	DenyPath Denial = "path"
	// DenySource: the header or the path form from a caller the install does not allow.
	DenySource Denial = "source"
)

// Sources is a set of caller networks; the zero value admits nobody.
type Sources struct {
	prefixes []netip.Prefix
}

// ParseSources reads a comma-separated list of CIDRs (a bare IP is its /32 or /128); empty
// admits nobody.
func ParseSources(s string) (Sources, error) {
	var out Sources
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return Sources{}, fmt.Errorf("%q is neither a CIDR nor an IP", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out.prefixes = append(out.prefixes, p.Masked())
	}
	return out, nil
}

// MustSources is ParseSources for constants.
func MustSources(s string) Sources {
	out, err := ParseSources(s)
	if err != nil {
		panic(err)
	}
	return out
}

// Admits reports whether remoteAddr (an http.Request's "ip:port") is in one of the networks.
func (s Sources) Admits(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap() // an IPv4 caller on a dual-stack listener
	for _, p := range s.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// String lists the networks as the flag takes them.
func (s Sources) String() string {
	out := make([]string, len(s.prefixes))
	for i, p := range s.prefixes {
		out[i] = p.String()
	}
	return strings.Join(out, ",")
}

// InferencePath reports whether p is a path a model's HTTPRoute forwards: one of
// reconcile.InferencePaths or below it (the route matches them as PathPrefix, element by
// element), written in its one clean form, so no "..", "." or "//" walks out of it.
func InferencePath(p string) bool {
	if p == "" || path.Clean(p) != p {
		return false
	}
	for _, ip := range reconcile.InferencePaths {
		if p == ip || strings.HasPrefix(p, ip+"/") {
			return true
		}
	}
	return false
}

// Refusal messages, as docs/security.md quotes them.
func noModelMessage(header string) string {
	return "no model in the request: send " + header + ": namespace/name, or a path /namespace/name/..."
}

func unknownModelMessage(k Key) string {
	return fmt.Sprintf("model %s is not a model the activator serves: it serves only InferenceServices at minReplicas 0, through the Service the operator made for them", k)
}

func pathMessage(p string, k Key) string {
	return fmt.Sprintf("path %s is not an inference path of model %s: the activator forwards only what the model's route does (/v1/completions, /v1/chat/completions, ...)", p, k)
}

func headerSourceMessage(header string) string {
	return "the " + header + " header is accepted only from the gateway (--model-header-sources)"
}

const pathSourceMessage = "the /namespace/name/ path form is not open to this caller (--path-sources)"
