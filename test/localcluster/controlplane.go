package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	apiserveroptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
	cmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	cmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedoptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
)

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func portFree(port int) bool { return portFreeOn("127.0.0.1", port) }

func portFreeOn(host string, port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// persistedPort returns the port stored in file if it is still free, or a
// new free port (then stored).
func persistedPort(file string) (int, error) {
	if b, err := os.ReadFile(file); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 && portFree(p) {
			return p, nil
		}
	}
	p, err := freePort()
	if err != nil {
		return 0, err
	}
	return p, os.WriteFile(file, []byte(strconv.Itoa(p)), 0o600)
}

// persistedPortOn is persistedPort for a port that must be free on host (the kubelet API's
// on the node addresses).
func persistedPortOn(file, host string) (int, error) {
	if b, err := os.ReadFile(file); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 && portFreeOn(host, p) {
			return p, nil
		}
	}
	for {
		p, err := freePort()
		if err != nil {
			return 0, err
		}
		if portFreeOn(host, p) {
			return p, os.WriteFile(file, []byte(strconv.Itoa(p)), 0o600)
		}
	}
}

// startEtcd runs an embedded single-member etcd on loopback.
func startEtcd(dataDir string) (*embed.Etcd, string, error) {
	clientPort, err := persistedPort(filepath.Join(dataDir, "etcd-client.port"))
	if err != nil {
		return nil, "", err
	}
	peerPort, err := persistedPort(filepath.Join(dataDir, "etcd-peer.port"))
	if err != nil {
		return nil, "", err
	}
	cfg := embed.NewConfig()
	cfg.Name = "localcluster"
	cfg.Dir = filepath.Join(dataDir, "etcd")
	cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", clientPort))
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", peerPort))
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{"stderr"}
	cfg.QuotaBackendBytes = 2 << 30
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, "", fmt.Errorf("etcd did not become ready in 60s")
	}
	return e, cu.String(), nil
}

// runAPIServer drives kube-apiserver through the steps its cobra command
// runs: options -> flags -> complete -> validate -> config -> server chain.
func runAPIServer(ctx context.Context, args []string) error {
	s := apiserveroptions.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("kube-apiserver flags: %w", err)
	}
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	completed, err := s.Complete(ctx)
	if err != nil {
		return err
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return utilerrors.NewAggregate(errs)
	}
	// Each run in this process registers its informers under a name of its own: client-go
	// refuses a name twice, and the API server's restart (SIGUSR1) runs it again.
	name := "kube-apiserver"
	if n := apiServerRuns.Add(1); n > 1 {
		name = fmt.Sprintf("kube-apiserver-run-%d", n)
	}
	if completed.InformerName, err = cache.NewInformerName(name); err != nil {
		return err
	}
	return apiserverapp.Run(ctx, completed)
}

// apiServerRuns counts the API server's runs in this process.
var apiServerRuns atomic.Int32

func runControllerManager(ctx context.Context, args []string) error {
	s, err := cmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return err
	}
	fs := pflag.NewFlagSet("kube-controller-manager", pflag.ContinueOnError)
	named := s.Flags(cmapp.KnownControllers(), cmapp.ControllersDisabledByDefault(), cmapp.ControllerAliases())
	s.ParsedFlags = &named
	for _, f := range named.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("kube-controller-manager flags: %w", err)
	}
	if err := s.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	c, err := s.Config(ctx, cmapp.KnownControllers(), cmapp.ControllersDisabledByDefault(), cmapp.ControllerAliases())
	if err != nil {
		return err
	}
	return cmapp.Run(ctx, c.Complete())
}

func runScheduler(ctx context.Context, args []string) error {
	opts := schedoptions.NewOptions()
	fs := pflag.NewFlagSet("kube-scheduler", pflag.ContinueOnError)
	for _, f := range opts.Flags.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("kube-scheduler flags: %w", err)
	}
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	if opts.InformerName == nil {
		name, err := cache.NewInformerName("kube-scheduler")
		if err != nil {
			return err
		}
		opts.InformerName = name
	}
	cc, sched, err := schedapp.Setup(ctx, opts)
	if err != nil {
		return err
	}
	return schedapp.Run(ctx, cc, sched)
}

var _ = klog.Info
