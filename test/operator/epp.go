package operator

// The Gateway API Inference Extension's endpoint picker (test/epp: the module's lightweight
// picker, lwepp, built with its listeners on 127.0.0.1), run against the local cluster for one
// InferencePool: the module's CRDs applied, the picker given a kubeconfig (the cluster admin's,
// or a ServiceAccount's to hold it to the RBAC the release would grant), its ext_proc and
// health gRPC servers on free loopback ports, metrics off, ready when its health service says
// SERVING (the picker has read its InferencePool and the pool's Ready pods).

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/example/inferenceservice-operator/test/cluster"
)

// EPPBinEnv names the endpoint picker built by test/epp/build.sh (make epp); the module's CRDs
// are in the directory next to it, EPPManifests(bin).
const EPPBinEnv = "EPP_BIN"

// EPPHealthService is the service the picker's health server reports SERVING once its
// InferencePool is read (test/epp/picker, as cmd/lwepp).
const EPPHealthService = "inference-extension"

// EPPManifests is where build.sh copies the module's CRDs (crd/) for the binary bin.
func EPPManifests(bin string) string { return bin + "-manifests" }

// InstallInferencePoolCRDs applies the inference extension's CRDs (InferencePool
// inference.networking.k8s.io/v1, InferencePoolImport inference.networking.x-k8s.io/v1alpha1)
// from the build next to bin and waits until they are served.
func InstallInferencePoolCRDs(ctx context.Context, c *cluster.Cluster, bin string) error {
	crds := filepath.Join(EPPManifests(bin), "crd")
	if _, _, err := c.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", crds); err != nil {
		return fmt.Errorf("inference extension CRDs: %w", err)
	}
	return waitEstablished(ctx, c, crds, time.Minute)
}

// EPPOptions says which pool the picker serves and how.
type EPPOptions struct {
	Namespace, Pool string
	// Kubeconfig the picker runs with; empty: the cluster admin's.
	Kubeconfig string
	// Plaintext serves ext_proc without TLS; by default the picker serves TLS with a
	// self-signed certificate, as the release does, and Dial skips verification.
	Plaintext bool
	// ReadyTimeout bounds the wait for SERVING (default 2m).
	ReadyTimeout time.Duration
}

// EPP is one running endpoint picker.
type EPP struct {
	m         *Manager
	LogPath   string
	ExtProc   string // 127.0.0.1:port, the ext_proc gRPC server a gateway calls
	Health    string // 127.0.0.1:port, gRPC health (service EPPHealthService)
	plaintext bool
}

// StartEPP installs the CRDs and runs bin for opts' pool with its log in dir, and waits until
// the picker is ready. The pool itself need not exist yet: the picker waits for it, and is
// ready only once it has read it.
func StartEPP(ctx context.Context, c *cluster.Cluster, bin, dir string, opts EPPOptions) (*EPP, error) {
	if err := InstallInferencePoolCRDs(ctx, c, bin); err != nil {
		return nil, err
	}
	ports, err := freeLoopbackPorts(2)
	if err != nil {
		return nil, err
	}
	kubeconfig := opts.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = c.KubeconfigPath()
	}
	e := &EPP{
		m:         &Manager{name: "epp-" + opts.Pool, c: c, dir: dir},
		ExtProc:   net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		Health:    net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		plaintext: opts.Plaintext,
	}
	cmd := exec.Command(bin,
		"--pool-name="+opts.Pool, "--pool-namespace="+opts.Namespace,
		"--grpc-addr="+e.ExtProc, "--grpc-health-addr="+e.Health, "--metrics-addr=0",
		"--kubeconfig="+kubeconfig, "--secure-serving="+strconv.FormatBool(!opts.Plaintext),
		"--zap-log-level=2")
	// The flag, and the environment for anything that reads it rather than the flag.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if err := e.m.start(cmd); err != nil {
		return nil, err
	}
	e.LogPath = e.m.LogPath
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	if err := e.waitServing(ctx, timeout); err != nil {
		e.m.Kill()
		return nil, err
	}
	return e, nil
}

// waitServing polls the health service until SERVING, the process's exit or the deadline.
func (e *EPP) waitServing(ctx context.Context, timeout time.Duration) error {
	conn, err := grpc.NewClient("passthrough:///"+e.Health, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithNoProxy())
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		res, err := hc.Check(cctx, &healthpb.HealthCheckRequest{Service: EPPHealthService})
		cancel()
		switch {
		case err != nil:
			last = err.Error()
		case res.GetStatus() == healthpb.HealthCheckResponse_SERVING:
			return nil
		default:
			last = res.GetStatus().String()
		}
		select {
		case <-e.m.done:
			return fmt.Errorf("endpoint picker exited before ready; log %s ends:\n%s", e.LogPath, logTail(e.LogPath, 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("endpoint picker not SERVING in %s (last: %s); log %s ends:\n%s", timeout, last, e.LogPath, logTail(e.LogPath, 20))
		}
	}
}

// Dial is a gRPC client of the picker's ext_proc server, as a gateway connects: TLS without
// verifying the self-signed certificate (or plaintext), straight to the loopback address (no
// resolver, no proxy).
func (e *EPP) Dial() (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if !e.plaintext {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the picker's certificate is self-signed, made at its start
	}
	return grpc.NewClient("passthrough:///"+e.ExtProc, grpc.WithTransportCredentials(creds), grpc.WithNoProxy())
}

// Stop ends the picker with SIGTERM, killing it after timeout.
func (e *EPP) Stop(timeout time.Duration) error {
	_ = e.m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.m.done:
		e.m.log.Close()
		return nil
	case <-time.After(timeout):
		e.m.Kill()
		return fmt.Errorf("endpoint picker did not stop in %s", timeout)
	}
}

// Exited is closed when the process has exited.
func (e *EPP) Exited() <-chan struct{} { return e.m.done }
