package reconcile

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// Log tails as vLLM v0.11 leaves them (the fake vLLM server of test/localcluster prints the
// same), as the kubelet returns them: a process prefix on the server's lines, none on
// argparse's.
const (
	logBadArgument = `usage: vllm serve [model_tag] [options]
vllm serve: error: unrecognized arguments: --foo
`
	logGPUOOM = `(EngineCore_DP0 pid=250) INFO 12-03 15:04:05 [gpu_model_runner.py:2602] Starting to load model meta-llama/Llama-3.1-70B-Instruct...
(EngineCore_DP0 pid=250) ERROR 12-03 15:04:09 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=250) Traceback (most recent call last):
(EngineCore_DP0 pid=250)   File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/model_loader/default_loader.py", line 264, in load_weights
(EngineCore_DP0 pid=250)     loaded_weights = model.load_weights(
(EngineCore_DP0 pid=250)   File "/usr/local/lib/python3.12/dist-packages/torch/utils/_device.py", line 104, in __torch_function__
(EngineCore_DP0 pid=250)     return func(*args, **kwargs)
(EngineCore_DP0 pid=250) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.50 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.21 MiB is free. Including non-PyTorch memory, this process has 79.19 GiB memory in use. Of the allocated memory 78.94 GiB is allocated by PyTorch, and 48.83 MiB is reserved by PyTorch but unallocated.
(APIServer pid=1) Traceback (most recent call last):
(APIServer pid=1)   File "/usr/local/bin/vllm", line 10, in <module>
(APIServer pid=1)     sys.exit(main())
(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py", line 880, in wait_for_engine_startup
(APIServer pid=1)     raise RuntimeError("Engine core initialization failed. "
(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
`
	logMissingWeights = `(APIServer pid=1) INFO 12-03 15:04:05 [utils.py:233] non-default args: {'model': '/models/llama'}
(APIServer pid=1) Traceback (most recent call last):
(APIServer pid=1)   File "/usr/local/bin/vllm", line 10, in <module>
(APIServer pid=1)     sys.exit(main())
(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/config.py", line 633, in get_config
(APIServer pid=1)     raise ValueError(
(APIServer pid=1) ValueError: Invalid repository ID or local directory specified: '/models/llama'.
(APIServer pid=1) Please verify the following requirements:
(APIServer pid=1) 1. Provide a valid Hugging Face repository ID.
(APIServer pid=1) 2. Specify a local directory that contains a recognized configuration file.
(APIServer pid=1)    - For Hugging Face models: ensure the presence of a 'config.json'.
(APIServer pid=1)    - For Mistral models: ensure the presence of a 'params.json'.
`
	logNoConfigJSON = `INFO 12-03 15:04:05 [api_server.py:1842] vLLM API server version 0.6.3
Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/transformers/utils/hub.py", line 403, in cached_file
    resolved_file = hf_hub_download(
  File "/usr/local/lib/python3.12/dist-packages/transformers/configuration_utils.py", line 689, in _get_config_dict
    resolved_config_file = cached_file(
    ^^^^^^^^^^^^^^^^^^^^^
OSError: /models/llama does not appear to have a file named config.json. Checkout 'https://huggingface.co//models/llama/tree/None' for available files.
`
	// The engine dies while serving: the root cause first, then the API server's own error
	// pointing at it, then uvicorn's shutdown.
	logEngineDead = `(APIServer pid=1) INFO:     127.0.0.1:50412 - "GET /health HTTP/1.1" 200 OK
(EngineCore_DP0 pid=250) ERROR 12-03 15:04:05 [core.py:710] EngineCore encountered a fatal error.
(EngineCore_DP0 pid=250) Traceback (most recent call last):
(EngineCore_DP0 pid=250)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 701, in run_engine_core
(EngineCore_DP0 pid=250)     engine_core.run_busy_loop()
(EngineCore_DP0 pid=250) RuntimeError: CUDA error: an illegal memory access was encountered
(EngineCore_DP0 pid=250) CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
(EngineCore_DP0 pid=250) For debugging consider passing CUDA_LAUNCH_BLOCKING=1
(APIServer pid=1) ERROR 12-03 15:04:05 [async_llm.py:480] AsyncLLM output_handler failed.
(APIServer pid=1) Traceback (most recent call last):
(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/async_llm.py", line 439, in output_handler
(APIServer pid=1)     outputs = await engine_core.get_output_async()
(APIServer pid=1) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
(APIServer pid=1) INFO:     Shutting down
(APIServer pid=1) INFO:     Application shutdown complete.
(APIServer pid=1) INFO:     Finished server process [1]
`
	// A tail that starts inside the traceback: no "Traceback" header, frames first.
	logCutTraceback = `(APIServer pid=1)     raise ValueError(
(APIServer pid=1) ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group.
`
	// Killed by the kernel mid-load: no exception, the last line is where it was.
	logOOMKilled = `(APIServer pid=1) INFO 12-03 15:04:05 [model.py:1510] Using max model len 131072
(EngineCore_DP0 pid=250) INFO 12-03 15:04:06 [gpu_model_runner.py:2602] Starting to load model m...
(EngineCore_DP0 pid=250) Loading safetensors checkpoint shards:  33% Completed | 1/3 [00:01<00:02,  1.10s/it]
`
	logBindFailed = `(APIServer pid=1) INFO:     Waiting for application startup.
(APIServer pid=1) INFO:     Application startup complete.
(APIServer pid=1) ERROR:    [Errno 98] error while attempting to bind on address ('127.16.0.5', 8000): address already in use
`
	// Python's chained exceptions: the last one raised is the one that ended the process.
	logChained = `Traceback (most recent call last):
  File "/app/main.py", line 3, in <module>
    import vllm
ModuleNotFoundError: No module named 'vllm._C'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/app/main.py", line 5, in <module>
    raise ImportError("vllm is not built for this CUDA version")
ImportError: vllm is not built for this CUDA version
`
)

// colour prefixes each "(Name pid=N) " tag of log with vLLM's CYAN and RESET codes.
func colour(log string) string {
	return regexp.MustCompile(`(?m)^(\([A-Za-z0-9_]+ pid=\d+\))`).ReplaceAllString(log, "\x1b[1;36m$1\x1b[0;0m")
}

// TestLastWordsOfDropsLaterRuns: read while the kubelet restarted the container, the current
// run's log is another run's: lines stamped after the crashed run ended are not its words.
func TestLastWordsOfDropsLaterRuns(t *testing.T) {
	finished := t0 // the API's one-second precision: the run ended within [t0, t0+1s)
	run := CrashedRun{StartedAt: t0.Add(-time.Minute), FinishedAt: finished}
	stamp := func(d time.Duration, line string) string {
		return finished.Add(d).Format(time.RFC3339Nano) + " " + line + "\n"
	}
	ours := stamp(-time.Second, "usage: vllm serve [model_tag] [options]") + stamp(900*time.Millisecond, "vllm serve: error: unrecognized arguments: --foo")
	if got, ok := LastWordsOf(ours, run); !ok || got != "vllm serve: error: unrecognized arguments: --foo" {
		t.Fatalf("its own run: %q %v", got, ok)
	}
	next := stamp(3*time.Second, "(APIServer pid=1) INFO 12-03 15:04:05 [api_server.py:1842] vLLM API server version 0.11.0")
	if got, ok := LastWordsOf(next, run); ok {
		t.Fatalf("the next run's log taken as the crashed run's: %q", got)
	}
	if got, ok := LastWordsOf(ours+next, run); !ok || got != "vllm serve: error: unrecognized arguments: --foo" {
		t.Fatalf("both runs: %q %v", got, ok)
	}
	before := stamp(-2*time.Minute, "(APIServer pid=1) ValueError: the run before")
	if got, ok := LastWordsOf(before, run); ok {
		t.Fatalf("the run before's log taken as the crashed run's: %q", got)
	}
	if got, ok := LastWordsOf("", run); ok {
		t.Fatalf("an empty log: %q", got)
	}
}

// TestRunLines: the stamps go, other runs' lines go with them, unstamped lines stay.
func TestRunLines(t *testing.T) {
	run := CrashedRun{StartedAt: t0.Add(-time.Minute), FinishedAt: t0}
	stamp := func(d time.Duration, line string) string { return t0.Add(d).Format(time.RFC3339Nano) + " " + line }
	tail := strings.Join([]string{stamp(-2*time.Minute, "the run before"), stamp(-time.Second, "ours"), "unstamped",
		stamp(900*time.Millisecond, "ours, within the second"), stamp(time.Second, "the next run")}, "\n")
	got, want := RunLines(tail, run), []string{"ours", "unstamped", "ours, within the second"}
	if !slices.Equal(got, want) {
		t.Fatalf("RunLines %q, want %q", got, want)
	}
}

// crashPod is a pod whose vllm container crashed (its log would be read), in the state the
// kubelet shows between a crash and the restart, or after the back-off began.
func crashPod(name string, waiting bool, restarts int32) *corev1.Pod {
	return pod(name, func(p *corev1.Pod) {
		run := &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", ContainerID: "containerd://" + name + "-run",
			StartedAt: metav1.NewTime(t0.Add(-time.Minute)), FinishedAt: metav1.NewTime(t0.Add(-time.Second))}
		cs := corev1.ContainerStatus{Name: "vllm", RestartCount: restarts, State: corev1.ContainerState{Terminated: run}}
		if waiting {
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			cs.LastTerminationState.Terminated = run
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	})
}

// TestLastWordsWanted: only the crashed run whose pod the message names is read, once the
// container has just exited (its current run) or after (its previous one).
func TestLastWordsWanted(t *testing.T) {
	w, _ := walkWorld(t, 2, 0)
	w.obs.Pods = []*corev1.Pod{crashPod("qwen3-7b6cd-b", true, 3), crashPod("qwen3-7b6cd-a", false, 2)}
	in := Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}
	got := LastWordsWanted(in)
	want := CrashedRun{Namespace: "default", Pod: "qwen3-7b6cd-a", PodUID: "qwen3-7b6cd-a", Container: "vllm",
		RunID: "containerd://qwen3-7b6cd-a-run", Previous: false, StartedAt: t0.Add(-time.Minute), FinishedAt: t0.Add(-time.Second), Engine: engine.VLLM}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %+v\nwant [%+v]: one read, for the pod the message names (the first by name)", got, want)
	}
	// The message names that pod whatever the order the cache lists them in.
	w.obs.Pods[0], w.obs.Pods[1] = w.obs.Pods[1], w.obs.Pods[0]
	if again := LastWordsWanted(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}); len(again) != 1 || again[0] != want {
		t.Fatalf("another cache order: %+v", again)
	}
	w.obs.Pods = []*corev1.Pod{crashPod("qwen3-7b6cd-a", true, 3)}
	if got := LastWordsWanted(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}); len(got) != 1 || !got[0].Previous {
		t.Fatalf("in back-off the crashed run is the previous one: %+v", got)
	}
	// A healthy model reads nothing.
	w.obs.Pods = []*corev1.Pod{pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{running(true, true, time.Hour)}
	})}
	if got := LastWordsWanted(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}); len(got) != 0 {
		t.Fatalf("a serving pod: %+v", got)
	}
}

// TestLastWordsInMessage: the line the I/O layer read is quoted for the run it was read from,
// never for a later one.
func TestLastWordsInMessage(t *testing.T) {
	w, _ := walkWorld(t, 1, 0)
	line := "vllm serve: error: unrecognized arguments: --foo"
	for _, c := range []struct {
		name   string
		words  map[string]string
		quoted bool
	}{
		{"its run", map[string]string{"containerd://qwen3-7b6cd-a-run": line}, true},
		{"an earlier run", map[string]string{"containerd://earlier": line}, false},
		{"not read", nil, false},
	} {
		for _, waiting := range []bool{false, true} {
			w.obs.Pods = []*corev1.Pod{crashPod("qwen3-7b6cd-a", waiting, 3)}
			w.obs.LastWords = c.words
			out := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)})
			msg := findCond(out.Status.Conditions, "Ready").Message
			if out.Status.Reason != ReasonCrashLoopBackOff || strings.Contains(msg, line) != c.quoted {
				t.Errorf("%s (waiting %v): reason %s message %q, quoted %v", c.name, waiting, out.Status.Reason, msg, c.quoted)
			}
		}
	}
}

// logPydantic is vLLM v0.11 refusing the split in VllmConfig's validator: pydantic wraps it.
const logPydantic = `(APIServer pid=1) Traceback (most recent call last):
(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", line 1431, in create_engine_config
(APIServer pid=1)     config = VllmConfig(
(APIServer pid=1)              ^^^^^^^^^^^
(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/pydantic/_internal/_dataclasses.py", line 123, in __init__
(APIServer pid=1)     s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)
(APIServer pid=1) pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig
(APIServer pid=1)   Value error, Total number of attention heads (32) must be divisible by tensor parallel size (3). [type=value_error, input_value=ArgsKwargs((), {'model_co...additional_config': {}}), input_type=ArgsKwargs]
(APIServer pid=1)     For further information visit https://errors.pydantic.dev/2.11/v/value_error
`
