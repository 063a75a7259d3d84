package reconcile

import "testing"

// The scheduler's messages as kube-scheduler 1.37 writes them (FitError), and older taint wording.
func TestUnschedulableReason(t *testing.T) {
	cases := []struct{ msg, want string }{
		{"0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod.", ReasonInsufficientGPU},
		{"0/4 nodes are available: 4 node(s) had untolerated taint(s). preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.", ReasonUntoleratedTaint},
		{"0/3 nodes are available: 3 node(s) had taints that the pod didn't tolerate.", ReasonUntoleratedTaint},
		{"0/4 nodes are available: 1 node(s) had untolerated taint(s), 3 Insufficient nvidia.com/gpu. preemption: ...", ReasonInsufficientGPU},
		{"0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint(s).", ReasonInsufficientGPU}, // a tie: the GPUs
		{"0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 3 node(s) didn't match Pod's node affinity/selector.", ReasonNodeSelectorMismatch},
		{"0/4 nodes are available: 4 Insufficient memory.", ReasonUnschedulable},
		{"0/4 nodes are available: 4 node(s) were unschedulable.", ReasonUnschedulable},
		{"0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: ...", ReasonVolumeClaimUnbound},
		{"Insufficient nvidia.com/gpu", ReasonInsufficientGPU},
		{"no nodes available to schedule pods", ReasonUnschedulable},
		{"0/4 nodes are available: 4 Insufficient amd.com/gpu.", ReasonUnschedulable}, // not the model's GPU resource
	}
	for _, c := range cases {
		if got := unschedulableReason(c.msg, "nvidia.com/gpu"); got != c.want {
			t.Errorf("%q: got %s, want %s", c.msg, got, c.want)
		}
	}
}
