// What the fake kubelet's runtime hands a container's process: the container as the process
// sees it, whichever program runs (a fake model server of vllm/, an exec image).

package proc

import (
	"context"
	"time"
)

// Spec is what a process sees of its container, as a real process would.
type Spec struct {
	// PodExec is the helper's command line (the kubelet's servicenet.go) an exec image's process starts
	// through, in a mount namespace of its own; nil: started directly.
	PodExec []string
	Image   string
	Command []string // the container's command; nil: the image's entrypoint (`vllm serve`)
	Args    []string
	Env     map[string]string // resolved environment, service links and Secrets included
	// GPUs the device plugin allocated to the container (its limit of any */gpu resource).
	GPUs int
	// MemoryLimit in bytes; 0: none.
	MemoryLimit int64
	// ShmSize is the size of what is mounted at /dev/shm: -1 nothing (the runtime's 64Mi),
	// 0 memory-backed without a limit, else the emptyDir's sizeLimit in bytes.
	ShmSize int64
	// Mounts maps each mount path to the identity of its volume ("pvc:<ns>/<claim>",
	// "emptyDir:<pod uid>/<volume>", ...), so a weights cache survives what its volume survives.
	Mounts   map[string]string
	Behavior Behavior // the kubelet.fake failure mode; Ready for plain vLLM images
	IP       string   // the pod's IP
	// GPUFault is the node's GPUs' fault (the kubelet's gpufault.go) when the process starts: its engine
	// fails to open the device.
	GPUFault GPUFault
	// Ray is the pod's place in its LeaderWorkerSet, for vLLM's multi-node launch (vllm/raygroup.go).
	Ray LWSMember
	// DNS is the pod's resolv.conf: how the process looks names up (the kubelet's clusterdns.go).
	DNS Resolver
	// DownloadMBPerS is the link speed a volume of the pod imposes (hf_download.go); 0: the
	// kubelet's.
	DownloadMBPerS float64
	// VolumeBytes is the capacity of the PersistentVolume mounted at HF_HOME; 0: unbounded.
	VolumeBytes int64
	// ReadOnly are the mount paths mounted read-only.
	ReadOnly map[string]bool
	// Exec is the executable of an exec image (the kubelet's exec.go), run instead of the fake server, in
	// its working directory Dir; "": the fake server.
	Exec, Dir string
}

// FakeRegistry is the kubelet's reserved registry: any image under it runs the fake server,
// and its name says the failure mode it plays (README.md's conventions).
const FakeRegistry = "kubelet.fake/"

// BehaviorKind is a failure mode of the kubelet.fake conventions, as the kubelet spells it.
type BehaviorKind string

// The failure modes a process plays; the kubelet's others (an image that cannot be pulled, an
// eviction) never start one.
const (
	Ready      BehaviorKind = "ready"
	NeverReady BehaviorKind = "never-ready"
	SlowReady  BehaviorKind = "slow-ready"
	CrashLoop  BehaviorKind = "crashloop"
	OOMKilled  BehaviorKind = "oomkilled"
)

// Behavior is the failure mode the process plays.
type Behavior struct {
	Kind  BehaviorKind
	Delay time.Duration // SlowReady: how long loading takes
}

// Resolver is the pod's resolv.conf: how the process looks a name up (getaddrinfo).
type Resolver interface {
	Lookup(ctx context.Context, name string) (string, error)
}

// GPUFault is the fault of the node's GPUs: none, an uncorrectable ECC error, or a GPU fallen
// off the bus.
type GPUFault string

const (
	FaultNone GPUFault = ""
	FaultECC  GPUFault = "ecc"
	FaultLost GPUFault = "lost"
)

// LWSMember is where a pod sits in its LeaderWorkerSet, from its labels.
type LWSMember struct {
	Namespace, Name, Group, Worker string // Worker "0": the leader
	Pod                            string
}
