package reconcile

import "testing"

// TestServicePortIsTheServers: the model's Service, the gateway's routes and the probes dial
// Port by PortName, which must be the engine's own endpoint.
func TestServicePortIsTheServers(t *testing.T) {
	if server.Port != Port || server.PortName != PortName {
		t.Fatalf("the engine serves on %s:%d, the Service on %s:%d", server.PortName, server.Port, PortName, Port)
	}
	if engineOf(nil) == nil || len(server.Command) == 0 || server.HealthPath == "" {
		t.Fatalf("no default engine, or one without a command or a health path: %+v", server)
	}
}
