// Package sglang is the fake SGLang the fake kubelet runs for a serving container whose command
// is SGLang's launcher (`python3 -m sglang.launch_server ...`): what an SGLang v0.5.3 container
// does on its pod's IP, as far as the kubelet, the probes, `kubectl logs` and clients can tell,
// from its arguments (args.go, flags.go) through its start-up log (run.go) to its OpenAI and
// native API, metrics and LoRA adapters (http.go, engine.go, lora.go), and the torch.distributed
// rendezvous of a multi-node group (multinode.go). Modelled on sgl-project/sglang v0.5.3
// (python/sglang/srt/server_args.py, entrypoints/http_server.py, metrics/collector.py,
// managers/, lora/). The contract the kubelet uses is this file: Launches, Serves, Start with
// a proc.Spec and a Config, and the Server's Exited, Port, Stop and GPUFault, as package
// vllm's; what the fakes share (the model catalog, the volumes' weights) is package hfmodel's.
package sglang

import (
	"path"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// Image is the SGLang image the local world pins: the v0.5.3 release's build for CUDA 12.6
// (Hopper), beside lmsysorg/sglang:v0.5.3 (CUDA 12.9), as SGLang's release workflow tags them
// (sgl-project/sglang's release-docker.yml at v0.5.3).
const Image = "lmsysorg/sglang:v0.5.3-cu126"

// launchModule is launch_server's module, as `python3 -m` runs it.
const launchModule = "sglang.launch_server"

// Serves says whether a container's image is an SGLang image: the last path element of its
// repository contains "sglang" (lmsysorg/sglang:v0.5.3-cu126).
func Serves(image string) bool {
	repo := image
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	repo = path.Base(repo)
	if i := strings.Index(repo, ":"); i >= 0 {
		repo = repo[:i]
	}
	return strings.Contains(repo, "sglang")
}

// Launches says whether the fake SGLang runs the container: its command is SGLang's launcher
// (directly, or the first command of an `sh -c` script), or it is an SGLang image that sets no
// command. Everything else (a vLLM command, a fill's `python3 -c`, sleep) is not SGLang's.
func Launches(spec proc.Spec) bool {
	if len(spec.Command) == 0 {
		return Serves(spec.Image) && !strings.HasPrefix(spec.Image, proc.FakeRegistry)
	}
	_, ok := launchArgs(spec.Command, spec.Args)
	return ok
}

// launchArgs reduces a command line to launch_server's argument list: `python3 -m
// sglang.launch_server ...` or `sh -c "[exec] python3 -m sglang.launch_server ..."`.
func launchArgs(command, args []string) ([]string, bool) {
	full := append(append([]string(nil), command...), args...)
	if len(full) == 0 {
		return nil, false
	}
	if b := path.Base(full[0]); (b == "sh" || b == "bash") && len(full) >= 3 && full[1] == "-c" {
		script, _ := substituted(full[2])
		return launchArgs(proc.ShellWords(script), nil)
	}
	if strings.HasPrefix(path.Base(full[0]), "python") && len(full) >= 3 && full[1] == "-m" && full[2] == launchModule {
		return full[3:], true
	}
	return nil, false
}

// commandSubst is a `$(NAME)` the kubelet left in a script because no variable has that name.
var commandSubst = regexp.MustCompile(`\$\(([^()]*)\)`)

// substituted is the script as sh runs it when the kubelet left `$(NAME)` in it: a command
// substitution of a command that does not exist, which dash reports and replaces with nothing
// (so `--nnodes $(LWS_GROUP_SIZE)` loses its value).
func substituted(script string) (string, []string) {
	var errs []string
	out := commandSubst.ReplaceAllStringFunc(script, func(m string) string {
		errs = append(errs, "sh: 1: "+commandSubst.FindStringSubmatch(m)[1]+": not found")
		return ""
	})
	return out, errs
}

// Config is what every fake SGLang of one kubelet shares; the kubelet fills it from its fake
// vLLM's, so both engines keep one time scale. Every zero field takes the default its comment
// names.
type Config struct {
	Ingress proc.Ingress // nil: every connection is accepted
	// LoadTime is loading the weights; default: each GPU's share read at LoadBandwidth, under
	// TimeScale, at least 100ms.
	LoadTime  time.Duration
	TokenTime time.Duration // per generated token; default 20ms
	// PrefillTime per prompt token (default 1ms) after PrefillBase (default 2ms), at most
	// PrefillMax (default 250ms).
	PrefillTime, PrefillBase, PrefillMax time.Duration
	// DownloadTime is fetching weights the HF_HOME volume does not hold; default: at
	// DownloadBandwidth, under TimeScale.
	DownloadTime time.Duration
	// TimeScale is the test's seconds per real second; default 0.01.
	TimeScale float64
	// DownloadBandwidth and LoadBandwidth are bytes per real second; default 500 MB/s and 2 GB/s.
	DownloadBandwidth, LoadBandwidth float64
	// AdapterLoadTime is how long POST /load_lora_adapter takes; default 1s.
	AdapterLoadTime time.Duration
	// CrashRun is how long a crashloop server serves, and an oomkilled one loads; default 1s.
	CrashRun time.Duration
	// GPUMemory is each GPU's memory in bytes; default 80 GiB (an H100).
	GPUMemory int64
	// MaxRunning is the scheduler's running batch when the container does not pass
	// --max-running-requests; 0: SGLang's own default (from the token pool, 2048 to 4096).
	MaxRunning int
	// Weights is what each volume already holds; share the kubelet's. nil: nothing is cached.
	Weights *hfmodel.WeightsCache
}

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
	deff := func(f *float64, v float64) {
		if *f <= 0 {
			*f = v
		}
	}
	deff(&c.TimeScale, 0.01)
	deff(&c.DownloadBandwidth, 500e6)
	deff(&c.LoadBandwidth, 2e9)
	if c.GPUMemory == 0 {
		c.GPUMemory = 80 * hfmodel.GiB
	}
	return c
}

// scaled is bytes moved at bandwidth, in the test's time.
func (c Config) scaled(bytes int64, bandwidth float64) time.Duration {
	return time.Duration(float64(bytes) / bandwidth * c.TimeScale * float64(time.Second))
}

// modelled is real seconds in the test's time.
func (c Config) modelled(seconds float64) time.Duration {
	return time.Duration(seconds * c.TimeScale * float64(time.Second))
}

// Server is one running fake SGLang process.
type Server struct {
	spec proc.Spec
	cfg  Config
	log  *proc.Log
	port int
	// life is the process's end; its lock also guards eng
	life *proc.Life

	args *serverArgs
	eng  *engine // nil until the scheduler is up
	// up is the tokenizer manager's server_status: Starting until the warm-up request has run.
	up atomic.Bool
	// dying: never-ready's engine dies right after the first health check it answered.
	dying bool
	dead  atomic.Bool
	lora  *loraRegistry
	// group is the torch.distributed group of a multi-node launch (multinode.go); nil alone.
	group *group
}

// Start starts the process: it logs, loads (the port stays closed meanwhile), warms up, then
// serves on spec.IP:port until Stop, unless it exits on its own, which it reports once on
// Exited.
func Start(spec proc.Spec, cfg Config, log *proc.Log) *Server {
	s := &Server{spec: spec, cfg: cfg.withDefaults(), log: log, port: defaultPort,
		life: proc.NewLife()}
	if len(spec.Command) == 0 {
		go s.imageEntrypoint()
		return s
	}
	argv, ok := launchArgs(spec.Command, spec.Args)
	if !ok {
		return s // not SGLang's launcher: silent, without a port, until stopped
	}
	if full := append(append([]string(nil), spec.Command...), spec.Args...); len(full) >= 3 && full[1] == "-c" {
		_, errs := substituted(full[2])
		for _, e := range errs {
			s.log.Printf("%s", e)
		}
	}
	args, err := parseServerArgs(argv)
	if err != nil {
		go s.argFailure(err)
		return s
	}
	s.args, s.port = args, args.port
	go s.run()
	return s
}

// Exited delivers the process's exit when it ends on its own; nothing when stopped.
func (s *Server) Exited() <-chan proc.Exit { return s.life.Exited() }

// Port is where the HTTP server listens (or will).
func (s *Server) Port() int { return s.port }

// Stop is the kubelet's SIGTERM: SGLang's launcher kills its process tree and uvicorn shuts
// down; loading and requests in flight are cancelled. It returns at once.
func (s *Server) Stop() {
	s.life.Stop(nil, func() {
		if s.args.nodeRank >= 1 {
			return // a worker's health server runs uvicorn at log level warning: no lines
		}
		s.uvicorn("Shutting down")
		s.uvicorn("Waiting for application shutdown.")
		s.uvicorn("Application shutdown complete.")
		s.uvicorn("Finished server process [1]")
	})
}
