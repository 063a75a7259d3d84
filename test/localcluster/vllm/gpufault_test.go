package vllm

import (
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

const (
	eccLine       = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
	noGPULine     = "RuntimeError: No CUDA GPUs are available"
	launchLine    = "RuntimeError: CUDA error: unspecified launch failure"
	engineInitErr = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
	engineDeadErr = "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."
)

// vtRootCause is the engine core's exception line: the last unprefixed-by-spaces line of its
// traceback, the one the API server's error points "above" to.
func vtRootCause(log *proc.Log) string {
	cause := ""
	for _, l := range strings.Split(log.Render(proc.LogOptions{TailLines: -1}), "\n") {
		rest, ok := strings.CutPrefix(l, corePrefix())
		if ok && (strings.HasPrefix(rest, "RuntimeError: ") || strings.HasPrefix(rest, "torch.")) {
			cause = rest
		}
	}
	return cause
}

// TestGPUFaultStartFails: on a node with sick GPUs every start of vLLM fails opening the
// device: the engine core's root cause, the API server's start-up error pointing at it, exit 1.
func TestGPUFaultStartFails(t *testing.T) {
	for _, tc := range []struct {
		fault proc.GPUFault
		cause string
	}{{proc.FaultECC, eccLine}, {proc.FaultLost, noGPULine}} {
		t.Run(string(tc.fault), func(t *testing.T) {
			t.Parallel()
			s, log, _ := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B"}, GPUFault: tc.fault}, Config{})
			st := vtExit(t, s, log)
			if st.Code != 1 || st.Reason != "Error" {
				t.Fatalf("exit %+v, want 1 Error", st)
			}
			if got := vtRootCause(log); got != tc.cause {
				t.Fatalf("root cause %q, want %q; log:\n%s", got, tc.cause, log.Render(proc.LogOptions{TailLines: -1}))
			}
			if got := vtLastLine(log); got != apiPrefix+engineInitErr {
				t.Fatalf("last line %q", got)
			}
			if text := log.Render(proc.LogOptions{TailLines: -1}); strings.Contains(text, "Loading safetensors") {
				t.Fatalf("the engine loaded weights on a device it could not open:\n%s", text)
			}
		})
	}
}

// TestGPUFaultKillsServing: a serving engine whose GPU fails dies at once as vLLM does: the
// engine core's CUDA error, the API server's EngineDeadError, uvicorn's shutdown, exit 1, the
// port closed. One still loading fails its start.
func TestGPUFaultKillsServing(t *testing.T) {
	for _, tc := range []struct {
		fault proc.GPUFault
		cause string
	}{{proc.FaultECC, eccLine}, {proc.FaultLost, launchLine}} {
		t.Run(string(tc.fault), func(t *testing.T) {
			t.Parallel()
			s, log, url := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B"}}, Config{})
			vtWaitStatus(t, "GET", url+"/health", "", 200)
			s.GPUFault(tc.fault)
			st := vtExit(t, s, log)
			text := log.Render(proc.LogOptions{TailLines: -1})
			if st.Code != 1 || st.Reason != "Error" {
				t.Fatalf("exit %+v, want 1 Error", st)
			}
			if got := vtRootCause(log); got != tc.cause {
				t.Fatalf("root cause %q, want %q; log:\n%s", got, tc.cause, text)
			}
			if !strings.Contains(text, apiPrefix+engineDeadErr) || !strings.HasSuffix(vtLastLine(log), "INFO:     Finished server process [1]") {
				t.Fatalf("no API server death after the engine's:\n%s", text)
			}
			if code, _ := vtCall("GET", url+"/health", ""); code != -1 {
				t.Fatalf("health after the fault: %d, want connection refused", code)
			}
			s.GPUFault(tc.fault) // an ended process says nothing more
			if got := vtLastLine(log); !strings.HasSuffix(got, "Finished server process [1]") {
				t.Fatalf("a second fault wrote %q", got)
			}
		})
	}
	t.Run("loading", func(t *testing.T) {
		t.Parallel()
		s, log, _ := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B"}}, Config{LoadTime: time.Minute})
		vtEventually(t, "loading", func() (bool, string) {
			return strings.Contains(log.Render(proc.LogOptions{TailLines: -1}), "Loading safetensors"), vtLastLine(log)
		})
		s.GPUFault(proc.FaultECC)
		if st := vtExit(t, s, log); st.Code != 1 || vtRootCause(log) != eccLine {
			t.Fatalf("exit %+v, root cause %q; log:\n%s", st, vtRootCause(log), log.Render(proc.LogOptions{TailLines: -1}))
		}
	})
}

// TestGPUFaultOtherCommand: a container that does not run vLLM never touched the GPU.
func TestGPUFaultOtherCommand(t *testing.T) {
	s, log, _ := vtStart(t, proc.Spec{Command: []string{"sleep", "infinity"}}, Config{})
	s.GPUFault(proc.FaultECC)
	select {
	case st := <-s.Exited():
		t.Fatalf("exit %+v; log:\n%s", st, log.Render(proc.LogOptions{TailLines: -1}))
	default:
	}
}
