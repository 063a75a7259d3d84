// Package vllm is the fake vLLM the fake kubelet runs for a serving container: what a vLLM
// container does on its pod's IP, as far as the kubelet, the probes, `kubectl logs` and clients
// can tell, from its arguments (args.go, flags.go) through its start-up log (run.go) to its
// OpenAI API, metrics and LoRA adapters (http.go, engine.go, lora.go), and the commands a vLLM
// image runs besides the server (hf_download.go, s3_fill.go, raygroup.go). The contract the
// kubelet uses is this file and kubelet.go: Serves, Start with a proc.Spec and a Config, and the
// Server's Exited, Port, Stop and GPUFault; the log and the exit it reports are package proc's.
// A second engine's fake (SGLang) is a package beside this one behind the same contract.
package vllm

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// servesModel says whether a container runs the fake vLLM server: a vLLM image (the last
// path element of its repository contains "vllm") or any image under kubelet.fake/.
func Serves(image string) bool {
	if strings.HasPrefix(image, proc.FakeRegistry) {
		return true
	}
	repo := image
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndex(repo, "/"); i >= 0 {
		repo = repo[i+1:]
	}
	if i := strings.Index(repo, ":"); i >= 0 {
		repo = repo[:i]
	}
	return strings.Contains(repo, "vllm")
}

// serverConfig is what every fake model server of one kubelet shares. Every zero field
// takes the default its comment names, so a zero serverConfig works.
type Config struct {
	// Ingress enforces NetworkPolicy on the server's port (the kubelet's netpol.go); nil: every connection
	// is accepted.
	Ingress proc.Ingress
	// LoadTime is loading the weights and warming up; default: each GPU's share of the weights
	// read at LoadBandwidth, under TimeScale, at least 100ms.
	LoadTime time.Duration
	// TokenTime is one engine step of a request decoding alone (reading the weights once);
	// default 20ms. A batch's steps take longer (step.go).
	TokenTime time.Duration
	// PrefillTime is per prompt token the prefix cache does not hold (a word counts as one),
	// and per decode in a step once the batch is compute-bound (step.go); default 1ms. Alone,
	// the time to first token is PrefillBase + uncached tokens x PrefillTime, at most
	// PrefillMax, then one TokenTime.
	PrefillTime time.Duration
	// PrefillBase is a step's fixed cost when it prefills; default 2ms.
	PrefillBase time.Duration
	// PrefillMax caps one step's prefill so long prompts keep tests fast; default 250ms;
	// negative: no cap.
	PrefillMax time.Duration
	// DownloadTime is fetching a Hugging Face model the HF_HOME volume does not hold yet;
	// default: its weights at DownloadBandwidth, under TimeScale.
	DownloadTime time.Duration
	// TimeScale is the test's seconds per real second for the modelled times; default 0.01,
	// so Qwen3-8B's 16 GB download (32 s at 500 MB/s) takes 0.32 s and DeepSeek-V3's 671 GB
	// (22 min) 13 s: long enough that a pod's minutes of loading are windows a test can see.
	TimeScale float64
	// DownloadBandwidth is bytes per real second a pod fetches weights from the Hub; default
	// 500 MB/s (a node's share of a data-centre link to the Hub).
	DownloadBandwidth float64
	// LoadBandwidth is bytes per real second one GPU's rank reads its share of the weights
	// from local disk into GPU memory; default 2 GB/s.
	LoadBandwidth float64
	// AdapterLoadTime is how long POST /v1/load_lora_adapter takes (fetching and reading the
	// adapter's weights) before it answers; default 1s. Adapters listed by --lora-modules load
	// before the port opens.
	AdapterLoadTime time.Duration
	// CrashRun is how long a crashloop server serves, and an oomkilled one loads, before
	// it dies; default 1s.
	CrashRun time.Duration
	// HealthDelayPerRequest is /health's extra latency per running or waiting request
	// (vLLM answers it on the event loop that also streams every token); default 10ms.
	HealthDelayPerRequest time.Duration
	// GPUMemory is each GPU's memory in bytes; default 80 GiB (an H100).
	GPUMemory int64
	// MaxWaiting bounds the engine's waiting queue; beyond it requests get 503. Default 4096.
	MaxWaiting int
	// MaxNumSeqs is the engine's slots when the container does not pass --max-num-seqs;
	// default vLLM's 256. A few make a small load queue (the demo's autoscaling step).
	MaxNumSeqs int
	// Weights is what each volume already holds; share one (hfmodel.NewWeightsCache) across the
	// kubelet's servers. nil: nothing is ever cached, every start downloads.
	Weights *hfmodel.WeightsCache
	// Ray is where the groups' Ray clusters meet (raygroup.go); share one across the kubelet's
	// servers. nil: a leader's cluster is itself alone, a worker finds no head.
	Ray *RayCluster
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.TokenTime, 20*time.Millisecond)
	def(&c.PrefillTime, time.Millisecond)
	def(&c.PrefillBase, 2*time.Millisecond)
	def(&c.PrefillMax, 250*time.Millisecond)
	def(&c.CrashRun, time.Second)
	def(&c.AdapterLoadTime, time.Second)
	def(&c.HealthDelayPerRequest, 10*time.Millisecond)
	deff := func(f *float64, v float64) {
		if *f <= 0 {
			*f = v
		}
	}
	deff(&c.TimeScale, 0.01)
	deff(&c.DownloadBandwidth, 500e6)
	deff(&c.LoadBandwidth, 2e9)
	if c.GPUMemory == 0 {
		c.GPUMemory = 80 * gib
	}
	if c.MaxWaiting == 0 {
		c.MaxWaiting = 4096
	}
	return c
}

// modelServer is one running fake vLLM process.
type Server struct {
	spec proc.Spec
	cfg  Config
	log  *proc.Log
	port int
	// life is the process's end (the port opens once the weights are loaded); its lock also
	// guards args, rayAddress and rayGPUs as a Ray launch sets them
	life *proc.Life

	args    *serveArgs
	started time.Time
	eng     *engine // nil until loaded
	// never-ready: the engine dies right after its first health check answered (so a startup
	// probe passes and readiness never does, as when an engine dies after start); from then on
	// /health answers 503.
	dying   bool
	dead    atomic.Bool
	apiKeys []string
	// rayAddress and rayGPUs: the Ray cluster `--distributed-executor-backend ray` runs on,
	// set by multi-node-serving.sh's leader; "" and 0: none (vLLM starts a local Ray).
	rayAddress string
	rayGPUs    int

	loraMu       sync.Mutex
	loras        []loraAdapter
	runtimeLoRA  bool // VLLM_ALLOW_RUNTIME_LORA_UPDATING
	requestCount uint64

	faults   *faults      // the container's fault knobs (faults.go); nil: none
	httpReqs httpRequests // http_requests_total (httpmetrics.go)
}

// startModelServer starts the process: it writes its log, loads the weights (the port stays
// closed meanwhile), then serves on spec.IP:port until Stop, unless it exits on its own
// (a bad argument, out of memory, ...), which it reports once on Exited.
func Start(spec proc.Spec, cfg Config, log *proc.Log) *Server {
	s := &Server{spec: spec, cfg: cfg.withDefaults(), log: log, port: 8000,
		life: proc.NewLife(), started: time.Now()}
	if l, ok := parseRayLaunch(spec.Command, spec.Args); ok {
		s.startRay(l)
		return s
	}
	command := spec.Command
	if len(command) == 0 { // the runtime runs the image's entrypoint with the args
		command = imageEntrypoint(spec.Image)
	}
	if d, ok := parseS3Fill(command, spec.Args); ok {
		go s.runS3Fill(d)
		return s
	}
	if d, ok := parseHFDownload(command, spec.Args); ok {
		go s.runHFDownload(d)
		return s
	}
	prog, argv, ok := serveCommand(command, spec.Args)
	if !ok {
		// some other program (sleep, a script): it runs, silent and without a port, until stopped
		return s
	}
	args, err := parseServeArgs(prog, argv)
	if err != nil {
		s.argFailure(err)
		return s
	}
	if !args.maxNumSeqsSet && s.cfg.MaxNumSeqs > 0 {
		args.maxNumSeqs = s.cfg.MaxNumSeqs
	}
	s.args, s.port = args, args.port
	go s.run()
	return s
}

// argFailure is argparse refusing the command line: its usage line and error, exit 2.
func (s *Server) argFailure(err error) {
	var ae *argError
	if errors.As(err, &ae) {
		s.log.Printf("%s", ae.usage())
	}
	s.log.Printf("%s", err)
	s.life.Exit(proc.Exit{Code: 2, Reason: "Error"})
}

// Exited delivers the process's exit when it ends on its own; nothing when stopped.
func (s *Server) Exited() <-chan proc.Exit { return s.life.Exited() }

// Port is where the server listens (or will, once loaded).
func (s *Server) Port() int { return s.port }

// Stop is the SIGTERM a kubelet sends: the server logs its shutdown, closes its port and
// cancels what it was doing (loading, requests in flight). It returns at once; calling it
// again does nothing.
func (s *Server) Stop() {
	// still loading: the process dies with nothing more to say
	s.life.Stop(func() { s.api("INFO", "launcher.py:99", "Shutting down FastAPI HTTP server.") }, func() {
		s.uvicorn("Shutting down")
		s.uvicorn("Waiting for application shutdown.")
		s.uvicorn("Application shutdown complete.")
	})
}

// scaled is bytes moved at bandwidth (bytes per real second), in the test's time.
func (c Config) scaled(bytes int64, bandwidth float64) time.Duration {
	return time.Duration(float64(bytes) / bandwidth * c.TimeScale * float64(time.Second))
}

// downloadTime is how long fetching weights bytes takes: DownloadTime, else modelled.
func (c Config) downloadTime(weights int64) time.Duration {
	if c.DownloadTime > 0 {
		return c.DownloadTime
	}
	return c.scaled(weights, c.DownloadBandwidth)
}

// loadTime is how long loading perGPU bytes on each GPU takes: LoadTime, else modelled.
func (c Config) loadTime(perGPU int64) time.Duration {
	if c.LoadTime > 0 {
		return c.LoadTime
	}
	return max(100*time.Millisecond, c.scaled(perGPU, c.LoadBandwidth))
}

// compileTime is torch.compile's time in a start: 40 real seconds (Dynamo and Inductor on an
// 8B model, cold), under TimeScale.
func (c Config) compileTime() time.Duration {
	return time.Duration(40 * c.TimeScale * float64(time.Second))
}

// graphTime is the CUDA graphs' capture: 10 real seconds, under TimeScale.
func (c Config) graphTime() time.Duration {
	return time.Duration(10 * c.TimeScale * float64(time.Second))
}
