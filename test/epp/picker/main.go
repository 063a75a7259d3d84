// Command picker is the Gateway API Inference Extension's lightweight endpoint picker (lwepp,
// sigs.k8s.io/gateway-api-inference-extension/pkg/lwepp at the version go.mod pins) with every
// listener bound to an address we choose. The module's own main (cmd/lwepp) listens on ":port"
// for its ext_proc gRPC server, its gRPC health server and its metrics: every interface, with
// no flag to narrow it. This main wires the same library parts (the datastore, the
// InferencePool and Pod reconcilers, the ext_proc streaming server) but opens the listeners
// itself, on 127.0.0.1 by default; the picking, the reconcilers and the ext_proc exchange are
// the module's, unchanged. See test/epp/README.md.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"sigs.k8s.io/gateway-api-inference-extension/pkg/common"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/lwepp/datastore"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/lwepp/handlers"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/lwepp/server"
)

// HealthService is the service name the health server reports on: NOT_SERVING until the
// InferencePool has been read into the datastore, then SERVING (the name cmd/lwepp uses, so a
// Deployment's gRPC probes carry over).
const HealthService = "inference-extension"

type options struct {
	poolName, poolNamespace, poolGroup   string
	grpcAddr, healthAddr, metricsAddr    string
	secureServing, extProcHealthChecking bool
}

func main() {
	zapOpts := zap.Options{Development: true}
	zapOpts.BindFlags(flag.CommandLine)
	// controller-runtime registers --kubeconfig on flag.CommandLine; ctrl.GetConfig reads it,
	// then KUBECONFIG, then the in-cluster config.
	pflag.CommandLine.AddGoFlagSet(flag.CommandLine)
	o := options{}
	fs := pflag.CommandLine
	fs.StringVar(&o.poolName, "pool-name", "", "Name of the InferencePool this picker serves (required).")
	fs.StringVar(&o.poolNamespace, "pool-namespace", server.DefaultPoolNamespace, "Namespace of the InferencePool.")
	fs.StringVar(&o.poolGroup, "pool-group", "inference.networking.k8s.io", "API group of the InferencePool (only inference.networking.k8s.io, v1).")
	fs.StringVar(&o.grpcAddr, "grpc-addr", fmt.Sprintf("127.0.0.1:%d", server.DefaultGrpcPort), "Address of the ext_proc gRPC server the gateway calls.")
	fs.StringVar(&o.healthAddr, "grpc-health-addr", fmt.Sprintf("127.0.0.1:%d", server.DefaultGrpcHealthPort), "Address of the gRPC health server (service "+HealthService+").")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "0", `Address of controller-runtime's metrics server; "0" turns it off.`)
	fs.BoolVar(&o.secureServing, "secure-serving", true, "Serve ext_proc over TLS with a self-signed certificate made at start (as cmd/lwepp does).")
	fs.BoolVar(&o.extProcHealthChecking, "health-checking", false, "Also register the gRPC health service on the ext_proc server (as cmd/lwepp's --health-checking).")
	pflag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("picker")
	if err := run(o); err != nil {
		log.Error(err, "picker failed")
		os.Exit(1)
	}
}

func run(o options) error {
	if o.poolName == "" {
		return errors.New("--pool-name is required")
	}
	log := ctrl.Log.WithName("picker")
	ctx := ctrl.SetupSignalHandler()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	pool := common.GKNN{
		NamespacedName: types.NamespacedName{Name: o.poolName, Namespace: o.poolNamespace},
		GroupKind:      schema.GroupKind{Group: o.poolGroup, Kind: "InferencePool"},
	}
	ds := datastore.NewDatastore(ctx)
	// The module's manager: a cache of the one InferencePool (by name) and of the pods of its
	// namespace, no health probe server, no leader election.
	mgr, err := server.NewDefaultManager(server.NewControllerConfig(true), pool, cfg,
		metricsserver.Options{BindAddress: o.metricsAddr},
		func(opts *ctrl.Options) { opts.HealthProbeBindAddress = "0" })
	if err != nil {
		return err
	}
	// SetupWithManager registers only the InferencePool and Pod reconcilers that fill ds; the
	// runner's own gRPC runnables (which listen on ":port") are not used.
	if err := (&server.ExtProcServerRunner{GKNN: pool, Datastore: ds}).SetupWithManager(mgr); err != nil {
		return err
	}

	// Listen before anything runs, so a taken address fails the start.
	extProcLis, err := net.Listen("tcp", o.grpcAddr)
	if err != nil {
		return fmt.Errorf("ext_proc listener: %w", err)
	}
	healthLis, err := net.Listen("tcp", o.healthAddr)
	if err != nil {
		return fmt.Errorf("health listener: %w", err)
	}

	var srvOpts []grpc.ServerOption
	if o.secureServing {
		cert, err := selfSigned(time.Now())
		if err != nil {
			return err
		}
		srvOpts = append(srvOpts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})))
	}
	extProc := grpc.NewServer(srvOpts...)
	extprocv3.RegisterExternalProcessorServer(extProc, handlers.NewStreamingServer(ds))
	if o.extProcHealthChecking {
		h := health.NewServer()
		h.SetServingStatus(extprocv3.ExternalProcessor_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
		healthpb.RegisterHealthServer(extProc, h)
	}
	if err := mgr.Add(serveUntilDone("ext-proc", extProc, extProcLis)); err != nil {
		return err
	}

	// The health server runs before the manager's caches sync, as cmd/lwepp's does.
	healthSrv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus(HealthService, healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(healthSrv, hs)
	go func() {
		if err := serveUntilDone("health", healthSrv, healthLis).Start(ctx); err != nil {
			log.Error(err, "health server")
		}
	}()
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for !ds.PoolHasSynced() {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		hs.SetServingStatus(HealthService, healthpb.HealthCheckResponse_SERVING)
		log.Info("InferencePool synced: serving", "pool", pool.String())
	}()

	log.Info("starting", "pool", pool.String(), "ext_proc", extProcLis.Addr().String(), "health", healthLis.Addr().String(), "metrics", o.metricsAddr, "tls", o.secureServing)
	return mgr.Start(ctx)
}

// serveUntilDone serves srv on lis until the context ends, then stops it gracefully.
func serveUntilDone(name string, srv *grpc.Server, lis net.Listener) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		stopped := make(chan struct{})
		go func() {
			select {
			case <-ctx.Done():
				srv.GracefulStop()
			case <-stopped:
			}
		}()
		err := srv.Serve(lis)
		close(stopped)
		if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("%s server: %w", name, err)
		}
		return nil
	})
}

// selfSigned is a P-256 certificate for the ext_proc server, valid a year from now; the
// gateway does not verify it (cmd/lwepp makes one the same way when it has none).
func selfSigned(now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "endpoint-picker"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
