package reconcile

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
)

// LoRA adapters are loaded at run time through each ready pod's /v1/load_lora_adapter and
// /v1/unload_lora_adapter (the server runs with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True), so a
// change of spec.adapters rolls no pod and a new pod gets them once it is ready. The controller's
// I/O layer asks each pod whose server is ready (servingPods) what it serves (Input.Adapters); Reconcile plans the calls
// (Output.AdapterSteps) and reports only what every answering pod lists.

// LoadedAdapter is one LoRA adapter a model server lists on /v1/models.
type LoadedAdapter struct{ Name, Path string }

// PodAdapters is what one ready model pod answered on /v1/models, and what loading on it last failed with.
type PodAdapters struct {
	Pod, IP string
	Loaded  []LoadedAdapter
	Err     string            // the pod could not be asked ("" when it answered)
	Failed  map[string]string // adapter name -> the server's error on the last load attempt
}

// AdapterStep is one call to a pod's runtime LoRA API.
type AdapterStep struct {
	Pod, IP    string
	Load       bool // false: unload
	Name, Path string
}

// AdapterPath is what vLLM's lora_path gets for an adapter's storageURI: a Hugging Face repository id
// (hf://org/name -> org/name) or a local path; anything vLLM cannot fetch itself is an error.
func AdapterPath(storageURI string) (string, error) {
	switch {
	case strings.HasPrefix(storageURI, "hf://"):
		id := strings.TrimPrefix(storageURI, "hf://")
		// A repository id is org/name or name: vLLM resolves it with huggingface_hub.
		if id == "" || strings.HasPrefix(id, "/") || strings.HasSuffix(id, "/") || strings.Count(id, "/") > 1 {
			return "", fmt.Errorf("storageURI %q: hf:// takes a Hugging Face repository id, hf://org/name", storageURI)
		}
		return id, nil
	case strings.HasPrefix(storageURI, "/"):
		return storageURI, nil
	case strings.HasPrefix(storageURI, "file://"):
		if p := strings.TrimPrefix(storageURI, "file://"); strings.HasPrefix(p, "/") {
			return p, nil
		}
		return "", fmt.Errorf("storageURI %q: file:// takes an absolute path, file:///path", storageURI)
	}
	if i := strings.Index(storageURI, "://"); i > 0 {
		return "", fmt.Errorf("storageURI %q: vLLM cannot fetch %s:// itself; use hf://org/name or a path inside the pod", storageURI, storageURI[:i])
	}
	return "", fmt.Errorf("storageURI %q: use hf://org/name or an absolute path inside the pod", storageURI)
}

// adapterPlan is planAdapters' decision.
type adapterPlan struct {
	steps  []AdapterStep
	loaded []string // wanted adapters every answering pod lists
	causes []Cause
	// cond is the AdaptersReady condition's status, reason and message.
	cond struct {
		status         metav1.ConditionStatus
		reason, detail string
	}
}

// planAdapters compares the adapters the spec wants with what each ready pod answered: a pod
// gets an unload for each adapter it lists that is not wanted (or is loaded from another
// path), then a load for each wanted adapter it lacks. Pods that could not be asked get no
// steps and do not count for status.loadedAdapters: only what a pod answered is claimed.
func planAdapters(want []crd.Adapter, pods []PodAdapters) adapterPlan {
	var p adapterPlan
	type wanted struct{ name, path string }
	var ok []wanted
	var unsupported []string
	for _, a := range want {
		path, err := AdapterPath(a.StorageURI)
		if err != nil {
			unsupported = append(unsupported, "adapter "+a.Name+": "+err.Error())
			continue
		}
		ok = append(ok, wanted{a.Name, path})
	}
	var answered int
	var failed, loading, unreachable []string
	count := make(map[string]int, len(ok))
	for _, pod := range pods {
		if pod.Err != "" {
			unreachable = append(unreachable, "pod "+pod.Pod+": "+pod.Err)
			continue
		}
		answered++
		have := make(map[string]string, len(pod.Loaded))
		for _, l := range pod.Loaded {
			have[l.Name] = l.Path
		}
		wantPath := make(map[string]string, len(ok))
		for _, w := range ok {
			wantPath[w.name] = w.path
		}
		for _, l := range pod.Loaded {
			if path, keep := wantPath[l.Name]; !keep || path != l.Path {
				p.steps = append(p.steps, AdapterStep{Pod: pod.Pod, IP: pod.IP, Name: l.Name, Path: l.Path})
			}
		}
		for _, w := range ok {
			if path, has := have[w.name]; has && path == w.path {
				count[w.name]++
				continue
			}
			p.steps = append(p.steps, AdapterStep{Pod: pod.Pod, IP: pod.IP, Load: true, Name: w.name, Path: w.path})
			if msg := pod.Failed[w.name]; msg != "" {
				failed = append(failed, "adapter "+w.name+" on pod "+pod.Pod+": "+msg+rankAdvice(msg))
			} else {
				loading = append(loading, w.name+" on pod "+pod.Pod)
			}
		}
	}
	if answered > 0 {
		for _, w := range ok {
			if count[w.name] == answered {
				p.loaded = append(p.loaded, w.name)
			}
		}
	}
	c := &p.cond
	switch {
	case len(unsupported) > 0:
		msg := strings.Join(unsupported, "; ")
		p.causes = append(p.causes, Cause{RankAdapters, ReasonAdapterSourceUnsupported, msg})
		c.status, c.reason, c.detail = metav1.ConditionFalse, ReasonAdapterSourceUnsupported, msg
	case len(failed) > 0:
		msg := "loading failed: " + strings.Join(failed, "; ")
		p.causes = append(p.causes, Cause{RankAdapters, ReasonAdapterLoadFailed, msg})
		c.status, c.reason, c.detail = metav1.ConditionFalse, ReasonAdapterLoadFailed, msg
	case answered == 0:
		c.status, c.reason, c.detail = metav1.ConditionUnknown, ReasonAdaptersNotObserved, "no ready pod answered /v1/models"
		if len(unreachable) > 0 {
			c.detail += ": " + strings.Join(unreachable, "; ")
		}
	case len(loading) > 0:
		c.status, c.reason, c.detail = metav1.ConditionFalse, ReasonAdaptersLoading, "loading "+strings.Join(loading, ", ")
	default:
		c.status, c.reason = metav1.ConditionTrue, ReasonAdaptersLoaded
		c.detail = fmt.Sprintf("%d adapters listed by %d ready pods", len(ok), answered)
	}
	if failed != nil && len(unsupported) > 0 {
		c.detail += "; loading failed: " + strings.Join(failed, "; ")
	}
	return p
}

// setCondition writes AdaptersReady on st, or removes it when the spec has no adapters.
func (p *adapterPlan) setCondition(st *crd.InferenceServiceStatus, isvc *crd.InferenceService, has bool, now metav1.Time) {
	if !has {
		meta.RemoveStatusCondition(&st.Conditions, crd.ConditionAdaptersReady)
		return
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: crd.ConditionAdaptersReady, Status: p.cond.status, Reason: p.cond.reason, Message: p.cond.detail,
		ObservedGeneration: isvc.Generation, LastTransitionTime: now,
	})
}

// rankAdvice is the way out of vLLM's refusal of an adapter of a larger rank than the server
// started with (PEFTHelper.validate_legal): the rank stated in the spec sizes --max-lora-rank.
func rankAdvice(serverMsg string) string {
	if !strings.Contains(serverMsg, "is greater than max_lora_rank") {
		return ""
	}
	return " (state the adapter's rank, r in its adapter_config.json, in spec.adapters[].rank: the operator then starts the server with a --max-lora-rank that holds it)"
}
