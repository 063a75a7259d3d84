// Command localcluster runs a whole Kubernetes control plane in one process
// on 127.0.0.1: embedded etcd, kube-apiserver, kube-controller-manager
// controllers, kube-scheduler, fake nodes and a fake kubelet.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/test/localcluster/vllm"
)

// controllers run in-process (kube-controller-manager --controllers).
var controllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"daemonset-controller",
	"job-controller",
	"cronjob-controller",
	"ttl-after-finished-controller",
	"garbage-collector-controller",
	"resourcequota-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"horizontal-pod-autoscaler-controller",
	"disruption-controller",
	"pod-garbage-collector-controller",
	// PVCs bind to PVs (a model weights cache on a PVC); the protection controllers remove the
	// finalizers the StorageObjectInUseProtection admission plugin adds, so deletions finish.
	"persistentvolume-binder-controller",
	"persistentvolumeclaim-protection-controller",
	"persistentvolume-protection-controller",
	"clusterrole-aggregation-controller",
	// A node that stops reporting turns NotReady and its pods are evicted (partition.go).
	"node-lifecycle-controller",
	"taint-eviction-controller",
}

var admissionPlugins = []string{
	"NamespaceLifecycle", "LimitRanger", "ServiceAccount", "TaintNodesByCondition", "PodSecurity",
	"Priority", "DefaultTolerationSeconds", "DefaultStorageClass", "StorageObjectInUseProtection",
	"PersistentVolumeClaimResize", "RuntimeClass", "DefaultIngressClass",
	"MutatingAdmissionWebhook", "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook", "ResourceQuota",
}

func main() {
	os.Exit(run())
}

func run() int {
	if len(os.Args) > 1 && os.Args[1] == podExecCommand {
		// The helper an exec image's process starts through (servicenet.go): it returns only
		// on failure, which the container shows as a failed start.
		fmt.Fprintf(os.Stderr, "%v\n", podExec(os.Args[2:]))
		return 128
	}
	var (
		dataDir     = flag.String("data-dir", "", "directory for etcd data, certificates and kubeconfigs (required)")
		kubeconfig  = flag.String("kubeconfig", "", "where to write the admin kubeconfig (default <data-dir>/admin.kubeconfig)")
		port        = flag.Int("apiserver-port", 0, "kube-apiserver port on 127.0.0.1; 0 reuses the data dir's last port if free, else picks a free one")
		nodes       = flag.Int("nodes", 4, "number of fake nodes")
		nodeCPU     = flag.String("node-cpu", "32", "CPU capacity of each fake node")
		nodeMemory  = flag.String("node-memory", "256Gi", "memory capacity of each fake node")
		nodeGPUs    = flag.Int64("node-gpus", 8, "nvidia.com/gpu capacity of each fake node")
		nodePods    = flag.Int64("node-pods", 110, "pod capacity of each fake node")
		nodeGrace   = flag.Duration("node-monitor-grace-period", 50*time.Second, "how long a node may go without a heartbeat before it is NotReady (kube-controller-manager's flag and default)")
		evictAfter  = flag.Int("pod-eviction-seconds", 300, "how long pods tolerate a node not ready or unreachable before eviction (the API server's --default-unreachable-toleration-seconds and --default-not-ready-toleration-seconds; default theirs)")
		backoffInit = flag.Duration("kubelet-crash-backoff-initial", 2*time.Second, "fake kubelet: first back-off after a crash or failed image pull (doubles each time)")
		backoffMax  = flag.Duration("kubelet-crash-backoff-max", 16*time.Second, "fake kubelet: back-off cap")
		crashRun    = flag.Duration("kubelet-crash-run", time.Second, "fake kubelet: how long a crashing container runs before it exits")
		terminated  = flag.Duration("kubelet-terminated-for", time.Second, "fake kubelet: how long a crashed container shows as terminated (Error/OOMKilled) before CrashLoopBackOff, and ErrImagePull before ImagePullBackOff")
		hpaSync     = flag.Duration("hpa-sync-period", 5*time.Second, "horizontal-pod-autoscaler sync period")
		serve       = flag.Bool("kubelet-serve", true, "fake kubelet: containers of vLLM images (and kubelet.fake/ images) run the fake vLLM server on their pod IP, with real probes and logs; false: every container follows the schedule model (the cheapest, for runs of thousands of pods)")
		loadTime    = flag.Duration("vllm-load-time", 0, "fake vLLM server: time to load a model's weights, its port closed meanwhile (0: each GPU's share read at 2 GB/s under --vllm-time-scale, at least 100ms)")
		tokenTime   = flag.Duration("vllm-token-time", 0, "fake vLLM server: time per generated token (0: the server's default)")
		download    = flag.Duration("vllm-download-time", 0, "fake vLLM server: time to download a model's weights that its HF_HOME volume does not hold yet (0: modelled from their size, --vllm-download-mb-per-s and --vllm-time-scale)")
		timeScale   = flag.Float64("vllm-time-scale", 0.01, "fake vLLM server: the test's seconds per real second for modelled download and load times")
		downloadBW  = flag.Float64("vllm-download-mb-per-s", 500, "fake vLLM server: megabytes per real second a pod downloads weights at")
		adapterLoad = flag.Duration("vllm-adapter-load-time", 0, "fake vLLM server: time POST /v1/load_lora_adapter takes to fetch and load an adapter (0: the server's default, 1s)")
		prefillTime = flag.Duration("vllm-prefill-time", 0, "fake vLLM server: prefill time per prompt token its prefix cache does not hold (0: the server's default, 1ms)")
		prefillBase = flag.Duration("vllm-prefill-base", 0, "fake vLLM server: fixed cost of every prefill, added to the per-token time (0: the server's default, 2ms)")
		prefillMax  = flag.Duration("vllm-prefill-max", 0, "fake vLLM server: cap on the modelled prefill time, so long prompts stay fast (0: the server's default, 250ms; negative: no cap)")
		maxNumSeqs  = flag.Int("vllm-max-num-seqs", 0, "fake vLLM server: engine slots when the container passes no --max-num-seqs (0: vLLM's 256)")
		ctrlQPS     = flag.Int("controller-qps", 20, "kube-api-qps of the controller manager (burst twice that); its own default, raised for runs of thousands of pods")
		verbosity   = flag.Int("v", 0, "klog verbosity of the control plane components")
		serviceNet  = flag.Bool("service-network", false, "a Service network: ClusterIPs from a loopback block of the cluster's own (127.S.0.0/16) behind a userspace proxy, the cluster DNS also on 127.S.0.10:53, and exec images' processes in their pod's mounts (resolv.conf, volumes), so they reach Services by name; needs root")
		netPolicy   = flag.Bool("network-policy", true, "fake kubelet: the fake vLLM servers' ports enforce NetworkPolicy ingress rules against the connecting pod (netpol.go); false: every connection is accepted")
		execs       execImages
	)
	flag.Var(&execs, "exec-image", "fake kubelet, repeatable: PREFIX=PATH runs a container whose image's repository is PREFIX (any tag or digest; a PREFIX ending in / : every repository under it) as a real process of the executable PATH (or PATH an unpacked image, config.json and rootfs/: its entrypoint, or the file a container's command names in it), on its pod IP ($LOCALCLUSTER_POD_IP) with a kubeconfig of its ServiceAccount ($KUBECONFIG)")
	flag.Parse()
	kfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(kfs)
	_ = kfs.Set("v", strconv.Itoa(*verbosity))
	_ = kfs.Set("logtostderr", "true")

	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "--data-dir is required")
		return 2
	}
	cpu, err := resource.ParseQuantity(*nodeCPU)
	if err != nil {
		fmt.Fprintf(os.Stderr, "--node-cpu: %v\n", err)
		return 2
	}
	mem, err := resource.ParseQuantity(*nodeMemory)
	if err != nil {
		fmt.Fprintf(os.Stderr, "--node-memory: %v\n", err)
		return 2
	}
	dir, err := filepath.Abs(*dataDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if *kubeconfig == "" {
		*kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	}
	if err := start(dir, *kubeconfig, *port, nodeConfig{count: *nodes, cpu: cpu, memory: mem, gpus: *nodeGPUs, pods: *nodePods, monitorGrace: *nodeGrace, evictionSeconds: *evictAfter},
		kubeletConfig{crashBackoffInitial: *backoffInit, crashBackoffMax: *backoffMax, crashRun: *crashRun, terminatedFor: *terminated,
			serve: *serve, server: vllm.Config{LoadTime: *loadTime, TokenTime: *tokenTime, CrashRun: *crashRun, MaxNumSeqs: *maxNumSeqs, AdapterLoadTime: *adapterLoad, DownloadTime: *download,
				TimeScale: *timeScale, DownloadBandwidth: *downloadBW * 1e6,
				PrefillTime: *prefillTime, PrefillBase: *prefillBase, PrefillMax: *prefillMax}, execImages: execs, networkPolicy: *netPolicy}, *hpaSync, *ctrlQPS, *serviceNet); err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
		return 1
	}
	return 0
}

func start(dir, kubeconfigPath string, port int, nc nodeConfig, kc kubeletConfig, hpaSync time.Duration, ctrlQPS int, withServiceNet bool) error {
	sigCh := make(chan os.Signal, 2)
	signal.Notify(sigCh, syscall.SIGTERM, syscall.SIGINT)
	if nc.monitorGrace <= 0 { // the controller manager's and the API server's defaults
		nc.monitorGrace = 50 * time.Second
	}
	if nc.evictionSeconds <= 0 {
		nc.evictionSeconds = 300
	}

	p, err := ensurePKI(filepath.Join(dir, "pki"))
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	etcd, etcdURL, err := startEtcd(dir)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()

	if port == 0 {
		if port, err = persistedPort(filepath.Join(dir, "apiserver.port")); err != nil {
			return err
		}
	} else {
		_ = os.WriteFile(filepath.Join(dir, "apiserver.port"), []byte(strconv.Itoa(port)), 0o600)
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", port)
	kubeletPort, err := persistedPortOn(filepath.Join(dir, "kubelet.port"), nodeIP(0))
	if err != nil {
		return err
	}
	nc.kubeletPort = int32(kubeletPort)
	podNet, err := claimPodNetwork(dir)
	if err != nil {
		return err
	}
	defer podNet.lock.Close()
	serviceCIDR := "10.0.0.0/16" // room for the scale benchmark's 10,000 Services
	if withServiceNet {
		sn, err := claimNetwork(dir, "service-network")
		if err != nil {
			return err
		}
		defer sn.lock.Close()
		kc.serviceNet = &serviceNetwork{octet: sn.octet}
		serviceCIDR = kc.serviceNet.cidr()
	}
	kcCrt, kcKey := p.clientPaths("apiserver-kubelet-client")

	kcDir := filepath.Join(dir, "kubeconfigs")
	if err := os.MkdirAll(kcDir, 0o700); err != nil {
		return err
	}
	write := func(path, stem string) error {
		b, err := p.kubeconfig(server, stem)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		return os.WriteFile(path, b, 0o600)
	}
	for _, id := range clientIdentities {
		if err := write(filepath.Join(kcDir, id.stem+".kubeconfig"), id.stem); err != nil {
			return err
		}
	}
	if err := write(kubeconfigPath, "admin"); err != nil {
		return err
	}

	// kube-apiserver: startAPI runs it; SIGUSR1 stops and starts it again alone (below).
	apiArgs := []string(nil)
	var apiCancel context.CancelFunc
	var apiErr chan error
	startAPI := func() {
		var apiCtx context.Context
		apiCtx, apiCancel = context.WithCancel(context.Background())
		apiErr = make(chan error, 1)
		errCh := apiErr
		go func() { errCh <- runAPIServer(apiCtx, apiArgs) }()
	}
	defer func() { apiCancel() }()
	{
		// The aggregation layer authenticates to aggregated API servers as on a real cluster
		// (aggregatorArgs). --enable-aggregator-routing stays off: it would send APIService
		// traffic to EndpointSlices, which cannot hold the loopback addresses everything here
		// listens on; an ExternalName Service on 127.0.0.1 reaches a local process instead.
		apiArgs = append([]string{
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + filepath.Join(dir, "pki", "apiserver-generated"),
			"--tls-cert-file=" + p.servingCert,
			"--tls-private-key-file=" + p.servingKey,
			"--client-ca-file=" + p.caCert,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + p.saPub,
			"--service-account-signing-key-file=" + p.saKey,
			"--authorization-mode=RBAC",
			"--enable-admission-plugins=" + strings.Join(admissionPlugins, ","),
			"--service-cluster-ip-range=" + serviceCIDR,
			"--endpoint-reconciler-type=none",
			"--default-not-ready-toleration-seconds=" + strconv.Itoa(nc.evictionSeconds),
			"--default-unreachable-toleration-seconds=" + strconv.Itoa(nc.evictionSeconds),
			// The kubelet API by address (no DNS for node names), with a client certificate,
			// its serving certificate checked against the cluster CA.
			"--kubelet-preferred-address-types=InternalIP",
			"--kubelet-client-certificate=" + kcCrt,
			"--kubelet-client-key=" + kcKey,
			"--kubelet-certificate-authority=" + p.caCert,
			"--allow-privileged=true",
			"--profiling=false",
			"--v=" + klogV(),
		}, p.aggregatorArgs()...)
	}
	startAPI()

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// Wait for /readyz.
	deadline := time.Now().Add(90 * time.Second)
	for {
		var code int
		res := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(context.Background())
		res.StatusCode(&code)
		if code == http.StatusOK {
			break
		}
		select {
		case err := <-apiErr:
			return fmt.Errorf("kube-apiserver exited: %v", err)
		case <-sigCh:
			return nil
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("kube-apiserver /readyz not ok after 90s")
		}
	}

	compCtx, compCancel := context.WithCancel(context.Background())
	defer compCancel()
	cmDone := make(chan error, 1)
	go func() {
		cmDone <- runControllerManager(compCtx, []string{
			"--kubeconfig=" + filepath.Join(kcDir, "controller-manager.kubeconfig"),
			"--leader-elect=false",
			"--secure-port=0",
			"--bind-address=127.0.0.1",
			"--controllers=" + strings.Join(controllers, ","),
			"--service-account-private-key-file=" + p.saKey,
			"--root-ca-file=" + p.caCert,
			"--use-service-account-credentials=false",
			"--flex-volume-plugin-dir=" + filepath.Join(dir, "controller-manager", "flexvolume"),
			"--cert-dir=" + filepath.Join(dir, "controller-manager", "certs"),
			"--horizontal-pod-autoscaler-sync-period=" + hpaSync.String(),
			"--node-monitor-grace-period=" + nc.monitorGrace.String(),
			"--kube-api-qps=" + strconv.Itoa(ctrlQPS),
			"--kube-api-burst=" + strconv.Itoa(2*ctrlQPS),
			"--v=" + klogV(),
		})
	}()
	schedDone := make(chan error, 1)
	go func() {
		schedDone <- runScheduler(compCtx, []string{
			"--kubeconfig=" + filepath.Join(kcDir, "scheduler.kubeconfig"),
			"--leader-elect=false",
			"--secure-port=0",
			"--bind-address=127.0.0.1",
			"--v=" + klogV(),
		})
	}()

	kcfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(kcDir, "kubelet.kubeconfig"))
	if err != nil {
		return err
	}
	kcfg.QPS, kcfg.Burst = 200, 400
	kclient, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return err
	}
	if err := nc.ensureNodes(compCtx, kclient); err != nil {
		return err
	}
	if kc.serve && kc.networkPolicy {
		kc.netpol = startNetPolicies(compCtx, kclient)
		kc.server.Ingress = kc.netpol
	}
	// Cluster DNS before the kubelet: a process resolves through it from its first line.
	dnsAddr := ""
	if kc.serve {
		dnsPort, err := persistedPortOn(filepath.Join(dir, "dns.port"), "127.0.0.1")
		if err != nil {
			return err
		}
		cd, err := startClusterDNS(compCtx, kclient, "127.0.0.1", dnsPort)
		if err != nil {
			return err
		}
		dnsAddr = cd.addr
		kc.dnsServer = dnsAddr
		if kc.serviceNet != nil {
			if err := cd.serveAlso(compCtx, kc.serviceNet.dnsIP(), 53); err != nil {
				return err
			}
			go (&serviceProxy{dns: cd, apiServer: strings.TrimPrefix(server, "https://"), ingress: kc.netpol}).run(compCtx)
		}
	} else if kc.serviceNet != nil {
		return fmt.Errorf("--service-network needs the cluster DNS of --kubelet-serve")
	}
	kc.apiServer, kc.caFile, kc.execDir = server, p.caCert, filepath.Join(dir, "exec")
	kl := newKubelet(kclient, kc, nc.count, newIPAllocator(podNet.octet))
	nc.heartbeat(compCtx, kclient, kl.parts)
	// Exec images' processes end with the cluster, however start returns.
	defer kl.stopProcesses(5 * time.Second)
	if err := kl.run(compCtx); err != nil {
		return err
	}
	var ips []net.IP
	for i := 0; i < nc.count && i < 250; i++ {
		ips = append(ips, net.ParseIP(nodeIP(i)))
	}
	cert, err := p.kubeletServing(ips)
	if err != nil {
		return err
	}
	if err := kl.serveKubeletAPI(compCtx, cert, p.caCertParsed, kubeletPort, nc.count); err != nil {
		return err
	}

	ready := fmt.Sprintf("localcluster ready kubeconfig=%s server=%s", kubeconfigPath, server)
	if dnsAddr != "" {
		ready += " dns=" + dnsAddr
	}
	fmt.Println(ready)

	var exitErr error
	// SIGUSR1 restarts the API server alone, as a real cluster's API server rolls: the
	// controllers, the scheduler, the kubelet and its pods keep running and reconnect, and the
	// model servers keep serving (a restart of this whole process restarts every pod with it).
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	for exitErr == nil {
		select {
		case <-sigCh:
			exitErr = errShutdown
		case err := <-apiErr:
			exitErr = fmt.Errorf("kube-apiserver exited: %v", err)
		case err := <-cmDone:
			exitErr = fmt.Errorf("kube-controller-manager exited: %v", err)
		case err := <-schedDone:
			exitErr = fmt.Errorf("kube-scheduler exited: %v", err)
		case <-usr1:
			// The old server closes its port at once and drains for up to its shutdown
			// timeout (a minute, while watch streams end): the new one starts on the port as
			// soon as it is free, as a rolled server's replacement takes the traffic, and the
			// old one's end is not waited for (its error goes to its own channel).
			klog.InfoS("restarting the kube-apiserver alone")
			apiCancel()
			deadline := time.Now().Add(time.Minute)
			for !portFree(port) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond) // poll interval
			}
			if !portFree(port) {
				exitErr = fmt.Errorf("kube-apiserver's port %d still taken a minute after its restart", port)
				continue
			}
			startAPI()
			fmt.Println("localcluster kube-apiserver restarted")
		}
	}
	if exitErr == errShutdown {
		exitErr = nil
	}
	klog.InfoS("localcluster shutting down")
	kl.stopProcesses(5 * time.Second) // before the API server goes: they may log their shutdown to it
	compCancel()
	waitFor(cmDone, 5*time.Second)
	waitFor(schedDone, 5*time.Second)
	apiCancel()
	waitFor(apiErr, 15*time.Second)
	return exitErr
}

// errShutdown ends the run loop on SIGTERM or SIGINT: a clean exit.
var errShutdown = errors.New("shut down")

func waitFor(ch <-chan error, d time.Duration) {
	select {
	case <-ch:
	case <-time.After(d):
	}
}

func klogV() string {
	if f := flag.Lookup("v"); f != nil {
		return f.Value.String()
	}
	return "0"
}
