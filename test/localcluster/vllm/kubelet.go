// What the fake kubelet hands a process beside its container's spec: the failure mode it
// plays, and the cluster's DNS and NetworkPolicy as the process meets them. The kubelet
// implements the interfaces (the kubelet's clusterdns.go, netpol.go); this package never reads the API.

package vllm

import (
	"context"
	"errors"
	"net"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// errNoResolver is a process without a resolv.conf looking a name up.
var errNoResolver = errors.New("Name or service not known")

// lookup resolves through the spec's DNS; nil: no name resolves.
func lookup(ctx context.Context, sp proc.Spec, name string) (string, error) {
	if sp.DNS == nil {
		if ip := net.ParseIP(name); ip != nil {
			return ip.String(), nil
		}
		return "", errNoResolver
	}
	return sp.DNS.Lookup(ctx, name)
}

// guard is cfg.Ingress's Guard; nil: every connection is accepted.
func (c Config) guard(l net.Listener) net.Listener { return proc.Guard(c.Ingress, l) }

// admitsPeer is cfg.Ingress's AdmitsPeer; nil: every connection is admitted.
func (c Config) admitsPeer(src, srcIP, dstIP string, port int32) (bool, string) {
	if c.Ingress == nil {
		return true, "no enforcement"
	}
	return c.Ingress.AdmitsPeer(src, srcIP, dstIP, port)
}
