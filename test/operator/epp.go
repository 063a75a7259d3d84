package operator

// The Gateway API Inference Extension's endpoint picker (test/epp: v1.5.0's full picker, cmd/epp's
// flags, built with its listeners on one IP) and the test gateway (test/epp/gateway: HTTPRoutes
// to Services and InferencePools, asking the pool's picker over ext_proc), run as processes
// against the local cluster. Nothing here speaks ext_proc: the main module does not import
// envoy's go-control-plane; tests go through the gateway over HTTP.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/example/inferenceservice-operator/test/cluster"
)

// EPPBinEnv names the endpoint picker built by test/epp/build.sh (make epp); the module's CRDs
// are in the directory next to it, EPPManifests(bin).
const EPPBinEnv = "EPP_BIN"

// EPPImageRepository is the extension's picker image, without its tag: the local cluster's
// kubelet runs EPP_BIN for a container of it (--exec-image), as the operator's pickers use it.
const EPPImageRepository = "registry.k8s.io/gateway-api-inference-extension/epp"

// EPPHealthService is the service a Deployment's gRPC probe names; the picker (as cmd/epp)
// answers SERVING for any name once its InferencePool is read.
const EPPHealthService = "inference-extension"

// EPPManifests is where build.sh copies the module's CRDs (crd/) for the binary bin.
func EPPManifests(bin string) string { return bin + "-manifests" }

// InstallInferencePoolCRDs applies the CRDs build.sh copies next to bin (InferencePool
// inference.networking.k8s.io/v1 and the HTTPRoute stand-in with a status subresource; not the
// optional x-k8s ones, which the picker's Role would then have to cover) and waits until they
// are served.
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
	// ConfigText is an EndpointPickerConfig (--config-text); empty: the picker's default
	// (queue 2, kv-cache 2, prefix 3).
	ConfigText string
	// Args are further cmd/epp flags.
	Args []string
	// ReadyTimeout bounds the wait for SERVING (default 2m).
	ReadyTimeout time.Duration
}

// EPP is one running endpoint picker.
type EPP struct {
	m         *Manager
	LogPath   string
	ExtProc   string // 127.0.0.1:port, the ext_proc gRPC server a gateway calls
	Health    string // 127.0.0.1:port, gRPC health (service EPPHealthService)
	Metrics   string // 127.0.0.1:port, controller-runtime's metrics server (/metrics, unauthenticated)
	plaintext bool
}

// StartEPP installs the CRDs and runs bin for opts' pool with its log in dir, and waits until
// the picker is ready. The pool itself need not exist yet: the picker waits for it, and is
// ready only once it has read it.
func StartEPP(ctx context.Context, c *cluster.Cluster, bin, dir string, opts EPPOptions) (*EPP, error) {
	if err := InstallInferencePoolCRDs(ctx, c, bin); err != nil {
		return nil, err
	}
	ports, err := freeLoopbackPorts(3)
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
		Metrics:   net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2])),
		plaintext: opts.Plaintext,
	}
	args := []string{
		"--pool-name=" + opts.Pool, "--pool-namespace=" + opts.Namespace,
		"--grpc-port=" + strconv.Itoa(ports[0]), "--grpc-health-port=" + strconv.Itoa(ports[1]),
		"--metrics-port=" + strconv.Itoa(ports[2]),
		"--secure-serving=" + strconv.FormatBool(!opts.Plaintext),
		// No OTel console spans in the log, no TokenReview per scrape, no pprof.
		"--tracing=false", "--metrics-endpoint-auth=false", "--enable-pprof=false",
		"--zap-log-level=2",
	}
	if opts.ConfigText != "" {
		args = append(args, "--config-text="+opts.ConfigText)
	}
	cmd := exec.Command(bin, append(args, opts.Args...)...)
	// cmd/epp has no --kubeconfig: controller-runtime's GetConfig reads KUBECONFIG. The
	// listeners bind LOCALCLUSTER_POD_IP (what the local kubelet sets), here 127.0.0.1.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "LOCALCLUSTER_POD_IP=127.0.0.1")
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

// GatewayBinEnv names the test gateway built by test/epp/build.sh next to the picker.
const GatewayBinEnv = "GATEWAY_BIN"

// StartGateway runs the test gateway bin with its log at logPath and args (at least
// --gateway NS/NAME and --kubeconfig), on free loopback ports for --listen and
// --metrics-listen, and waits (2m at most) until it serves /metrics, which it does once its
// caches have synced. It returns the HTTP address, the metrics address and a stop (SIGTERM,
// then a kill after 10s).
func StartGateway(ctx context.Context, bin, logPath string, args ...string) (addr, metricsAddr string, stop func() error, err error) {
	ports, err := freeLoopbackPorts(2)
	if err != nil {
		return "", "", nil, err
	}
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	metricsAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	m := &Manager{name: filepath.Base(logPath), dir: filepath.Dir(logPath)}
	cmd := exec.Command(bin, append([]string{"--listen=" + addr, "--metrics-listen=" + metricsAddr}, args...)...)
	if err := m.startLog(cmd, logPath); err != nil {
		return "", "", nil, err
	}
	stop = func() error {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
			m.log.Close()
			return nil
		case <-time.After(10 * time.Second):
			m.Kill()
			return fmt.Errorf("gateway did not stop in 10s; log %s", logPath)
		}
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		res, err := hc.Get("http://" + metricsAddr + "/metrics")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return addr, metricsAddr, stop, nil
			}
		}
		select {
		case <-m.done:
			return "", "", nil, fmt.Errorf("gateway exited before ready; log %s ends:\n%s", logPath, logTail(logPath, 20))
		case <-ctx.Done():
			m.Kill()
			return "", "", nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.Kill()
			return "", "", nil, fmt.Errorf("gateway not serving in 2m; log %s ends:\n%s", logPath, logTail(logPath, 20))
		}
	}
}
