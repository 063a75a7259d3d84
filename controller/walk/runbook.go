// The runbook's "look here next", one line per reason the walk can end on.

package walk

import (
	"strings"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// Reasons the plugin finds itself, beside the controller's.
const (
	reasonHPA   = "hpa"
	reasonStale = "stale"
)

const runbookMissingDeployment = "the operator has not created the Deployment: check the operator (its line above, its log) and `kubectl describe isvc` for ChildConflict or Forbidden"

// runbook is where to look after the marked layer, per reason: the command that shows more, and
// the change that usually fixes it.
var runbook = map[string]string{
	reconcile.ReasonWeightsDownloading:       "kubectl logs -n NS -l ai.example.com/weights --tail=3: the cache is filled once before any pod starts; not a failure",
	reconcile.ReasonWeightsDownloadFailed:    "kubectl logs -n NS -l ai.example.com/weights --tail=20: the token (spec.cache.tokenSecret), the model id, the claim's size; delete the Job to try again",
	reconcile.ReasonQuotaExceeded:            "kubectl describe resourcequota -n NS: raise the quota, or lower spec.replicas or spec.gpusPerReplica",
	reconcile.ReasonLimitRangeRefused:        "kubectl describe limitrange -n NS: set spec.resources within the range",
	reconcile.ReasonPodCreationRefused:       "the ReplicaSet's FailedCreate events above: an admission webhook or PodSecurity refused the pods",
	reconcile.ReasonInsufficientGPU:          "kubectl describe nodes | grep -A8 'Allocated resources': no node has spec.gpusPerReplica free GPUs; lower it, free GPUs, or add nodes",
	reconcile.ReasonUnschedulable:            "kubectl describe pod POD -n NS: taints, affinity or resources in the scheduler's message",
	reconcile.ReasonUntoleratedTaint:         "kubectl describe nodes | grep Taints: add the toleration, or fix the node a GPU health check tainted",
	reconcile.ReasonNodeSelectorMismatch:     "kubectl get pod POD -n NS -o yaml | grep -A5 nodeSelector: the labels admission set (a Kueue ResourceFlavor) against the nodes'",
	reconcile.ReasonVolumeClaimUnbound:       "kubectl describe pvc -n NS: the claim's StorageClass and provisioner",
	reconcile.ReasonWaitingForAdmission:      "kubectl get workloads -n NS: queued until the queue's quota admits the pods (scheduling gates); not a failure",
	reconcile.ReasonImagePullFailed:          "kubectl describe pod POD -n NS: the image name (spec.image), the registry and its pull secret",
	reconcile.ReasonContainerCreateFailed:    "kubectl describe pod POD -n NS: a missing ConfigMap, Secret or volume",
	reconcile.ReasonPullingImage:             "kubectl describe pod POD -n NS: the node is still pulling the image (vLLM's are 10-20 GB); not a failure",
	reconcile.ReasonVolumeMountFailed:        "kubectl describe pod POD -n NS: FailedMount or FailedAttachVolume, the weights cache's volume",
	reconcile.ReasonGPUError:                 "kubectl describe node of POD: the GPU fault the node reports; the pod must move to a healthy GPU",
	reconcile.ReasonFrequentEviction:         "kubectl describe node of POD: the pressure that keeps evicting the model's pods",
	reconcile.ReasonOOMKilled:                "kubectl logs POD -n NS --previous: raise spec.resources.limits.memory",
	reconcile.ReasonCrashLoopBackOff:         "kubectl logs POD -n NS --previous: the model server's error (arguments, model name, GPU memory)",
	reconcile.ReasonParallelismRefused:       "kubectl logs POD -n NS --previous: vLLM's check of the model's attention heads against the GPU split; set spec.parallelism or a GPU count the heads divide",
	reconcile.ReasonEvicted:                  "kubectl describe node of POD: memory or disk pressure on the node",
	reconcile.ReasonReadinessProbeFailing:    "kubectl logs POD -n NS: the server started but /health fails",
	reconcile.ReasonProgressDeadlineExceeded: "kubectl rollout status deploy/NAME -n NS: the new pods never became ready; the pods' rows say why",
	reconcile.ReasonRolloutInProgress:        "kubectl rollout status deploy/NAME -n NS: a rollout that only takes time",
	reconcile.ReasonReplicasNotReady:         "kubectl get pods -n NS -l ai.example.com/inferenceservice=NAME: which pods are not ready",
	reconcile.ReasonStarting:                 "kubectl get pods -n NS -w: pods scheduling, pulling or loading weights (the startup probe allows an hour)",
	reconcile.ReasonRouteNotAccepted:         "kubectl describe httproute/NAME -n NS: its status.parents say why the Gateway (--gateway-parent) did not accept it; is the Gateway's controller running?",
	reconcile.ReasonPickerUnavailable:        "kubectl logs deploy/NAME-epp -n NS and kubectl describe deploy/NAME-epp: the endpoint picker is not SERVING (image, RBAC of its ServiceAccount NAME-epp, or its InferencePool unreadable); requests go to the Service meanwhile",
	reconcile.ReasonPoolNotAccepted:          "kubectl get inferencepool NAME -n NS -o yaml: status.parents hold the Gateway's Accepted and ResolvedRefs verdicts; is the Gateway's implementation one that supports InferencePool?",
	reconcile.ReasonNoPoolEndpoints:          "kubectl get pods -l ai.example.com/inferenceservice=NAME -n NS: no ready pod matches the pool's selector",
	reasonHPA:                                "kubectl describe hpa/NAME -n NS: the metrics adapter (custom.metrics.k8s.io) or Prometheus does not serve " + queueMetricWord,
	reasonStale:                              "the cluster serves as asked but the status lags: the operator has not written what it sees (its line above)",
	reconcile.ReasonChildConflict:            "kubectl get deploy,svc,hpa NAME -n NS -o yaml: an object of that name the isvc does not own; rename or delete it",
	reconcile.ReasonForbidden:                "the operator's RBAC (manifests/rbac): kubectl auth can-i --as=system:serviceaccount:inferenceservice-system:inferenceservice-operator",
	reconcile.ReasonAdmissionDenied:          "kubectl describe isvc NAME -n NS: the webhook or policy that refused the child's write, named in the message",
	reconcile.ReasonInvalidSpec:              "kubectl describe isvc NAME -n NS: the message names the field to change",
	reconcile.ReasonReconcileError:           "the operator's log: an API call fails and is retried",
}

// queueMetricWord stands in runbook[reasonHPA] for the metric the HPA asks for, its model's
// engine's queue (num_requests_waiting for vLLM, num_queue_reqs for SGLang): hpaRunbook
// names it.
const queueMetricWord = "the model's queue metric"

// hpaRunbook is runbook[reasonHPA] naming metric, the HPA's metric; "" leaves the general word.
func hpaRunbook(metric string) string {
	if metric == "" {
		return runbook[reasonHPA]
	}
	return strings.Replace(runbook[reasonHPA], queueMetricWord, metric, 1)
}
