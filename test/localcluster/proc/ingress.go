package proc

import "net"

// Ingress enforces NetworkPolicy on a fake model server's listeners and its in-process
// connections, whichever engine it fakes; the kubelet implements it (its netpol.go).
type Ingress interface {
	// Guard wraps a listener: a connection no policy admits is reset.
	Guard(l net.Listener) net.Listener
	// AdmitsPeer decides a connection from the pod src (namespace/name) at srcIP to dstIP:port;
	// why says which policy refused it.
	AdmitsPeer(src, srcIP, dstIP string, port int32) (ok bool, why string)
}

// Guard is in's Guard of l; a nil in accepts every connection.
func Guard(in Ingress, l net.Listener) net.Listener {
	if in == nil {
		return l
	}
	return in.Guard(l)
}
