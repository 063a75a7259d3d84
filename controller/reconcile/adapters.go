package reconcile

import (
	"fmt"
	"strings"
)

// LoRA adapters are loaded at run time through each ready pod's /v1/load_lora_adapter and
// /v1/unload_lora_adapter (the server runs with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True), so a
// change of spec.adapters rolls no pod and a new pod gets them once it is ready. The controller's
// I/O layer asks each ready pod what it serves (Input.Adapters); Reconcile plans the calls
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
