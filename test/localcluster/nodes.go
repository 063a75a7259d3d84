package main

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

const (
	fakeNodeLabel = "localcluster.fake/node"
	gpuResource   = v1.ResourceName("nvidia.com/gpu")
	k8sVersion    = "v1.37.2"
)

type nodeConfig struct {
	count  int
	cpu    resource.Quantity
	memory resource.Quantity
	gpus   int64
	pods   int64
	// monitorGrace and evictionSeconds: how long a silent node stays Ready, and how long its
	// pods then tolerate it (partition.go).
	monitorGrace    time.Duration
	evictionSeconds int
	// kubeletPort is where every node's kubelet API listens (DaemonEndpoints): one per
	// cluster, so two clusters on the node addresses 127.0.1.x do not clash.
	kubeletPort int32
}

func nodeName(i int) string { return fmt.Sprintf("fake-node-%d", i) }

// nodeIP is a loopback address, so anything that dials a node stays local.
func nodeIP(i int) string { return fmt.Sprintf("127.0.1.%d", i%250+1) }

func (c nodeConfig) resources() v1.ResourceList {
	rl := v1.ResourceList{
		v1.ResourceCPU:              c.cpu,
		v1.ResourceMemory:           c.memory,
		v1.ResourcePods:             *resource.NewQuantity(c.pods, resource.DecimalSI),
		v1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	if c.gpus > 0 {
		rl[gpuResource] = *resource.NewQuantity(c.gpus, resource.DecimalSI)
	}
	return rl
}

func nodeConditions(now metav1.Time, prev []v1.NodeCondition) []v1.NodeCondition {
	want := []v1.NodeCondition{
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: v1.NodePIDPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
	}
	for i := range want {
		want[i].LastHeartbeatTime = now
		want[i].LastTransitionTime = now
		for _, p := range prev {
			if p.Type == want[i].Type && p.Status == want[i].Status {
				want[i].LastTransitionTime = p.LastTransitionTime
			}
		}
	}
	return want
}

func (c nodeConfig) nodeStatus(i int, prev []v1.NodeCondition) v1.NodeStatus {
	now := metav1.Now()
	return v1.NodeStatus{
		Capacity:    c.resources(),
		Allocatable: c.resources(),
		Phase:       v1.NodeRunning,
		Conditions:  nodeConditions(now, prev),
		Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: nodeIP(i)},
			{Type: v1.NodeHostName, Address: nodeName(i)},
		},
		DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: c.kubeletPort}},
		NodeInfo: v1.NodeSystemInfo{
			MachineID:               fmt.Sprintf("fake-machine-%d", i),
			SystemUUID:              fmt.Sprintf("fake-uuid-%d", i),
			BootID:                  fmt.Sprintf("fake-boot-%d", i),
			KernelVersion:           "6.1.0-fake",
			OSImage:                 "localcluster fake node",
			ContainerRuntimeVersion: "containerd://fake",
			KubeletVersion:          k8sVersion,
			OperatingSystem:         "linux",
			Architecture:            "amd64",
		},
	}
}

func (c nodeConfig) ensureNodes(ctx context.Context, client kubernetes.Interface) error {
	for i := 0; i < c.count; i++ {
		name := nodeName(i)
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			node = &v1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Name: name,
					Labels: map[string]string{
						"kubernetes.io/hostname":           name,
						"kubernetes.io/os":                 "linux",
						"kubernetes.io/arch":               "amd64",
						"node.kubernetes.io/instance-type": "fake-gpu-node",
						"nvidia.com/gpu.present":           "true",
						fakeNodeLabel:                      "true",
					},
					Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
				},
			}
			node, err = client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		}
		if err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		// The node lifecycle controller writes new nodes too (their taints): re-read on a conflict.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			node.Status = c.nodeStatus(i, node.Status.Conditions)
			_, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("node %s status: %w", name, err)
		}
		// The TaintNodesByCondition admission plugin taints new nodes not-ready; the node
		// lifecycle controller lifts it once the node reports Ready. Lifted here at once too, so
		// the scheduler need not wait for the controller's next pass.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var taints []v1.Taint
			for _, t := range node.Spec.Taints {
				if t.Key != v1.TaintNodeNotReady && t.Key != v1.TaintNodeUnreachable {
					taints = append(taints, t)
				}
			}
			if len(taints) == len(node.Spec.Taints) {
				return nil
			}
			node.Spec.Taints = taints
			_, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("node %s taints: %w", name, err)
		}
		if err := renewLease(ctx, client, name); err != nil {
			return err
		}
	}
	// Remove fake nodes left over from an earlier run with more nodes.
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: fakeNodeLabel + "=true"})
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for i := 0; i < c.count; i++ {
		keep[nodeName(i)] = true
	}
	for _, n := range list.Items {
		if !keep[n.Name] {
			_ = client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		}
	}
	return nil
}

func renewLease(ctx context.Context, client kubernetes.Interface, name string) error {
	leases := client.CoordinationV1().Leases(v1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		holder, dur := name, int32(40)
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       &holder,
				LeaseDurationSeconds: &dur,
				RenewTime:            &now,
			},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// heartbeat keeps every fake node Ready: Lease renewals every 10s and a node status heartbeat
// every 40s, as a kubelet does; a node cut from the control plane (partition.go) sends neither.
func (c nodeConfig) heartbeat(ctx context.Context, client kubernetes.Interface, parts *partitions) {
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for i := 0; i < c.count; i++ {
			if parts.isCut(nodeName(i)) {
				continue
			}
			if err := renewLease(ctx, client, nodeName(i)); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "lease renewal failed", "node", nodeName(i))
			}
		}
	}, 10*time.Second)
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for i := 0; i < c.count; i++ {
			if parts.isCut(nodeName(i)) {
				continue
			}
			if err := postNodeStatus(ctx, client, nodeName(i)); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "node status heartbeat failed", "node", nodeName(i))
			}
		}
	}, 40*time.Second)
}
