// The cause vocabulary in one place, as the deployment controller keeps its reasons in one
// block: every reason the status gives (each is API: users alert and script on it), the ranks
// that decide which cause wins (lower blocks more), and which reasons need someone to act.

package reconcile

// Ranks, most blocking first: the first cause by rank is the status's reason. Some are set
// relative to another, so they move with it (the value then in a trailing comment).
const (
	RankSpec        = 0 // nothing can proceed until the user changes the object
	RankConflict    = 10
	RankAPI         = 20
	RankPodCreation = 30
	RankScheduling  = 35
	RankImage       = 40
	RankContainer   = 42
	// RankGPU ranks a GPU fault before the crash it causes and before an OOM kill.
	RankGPU = 43
	// RankParallelism ranks the refusal with the other causes a crash log names.
	RankParallelism = RankGPU // 43
	RankOOM         = 44
	RankCrash       = 45
	// RankEviction ranks repeated evictions after a crash (which explains its own restarts)
	// and before readiness.
	RankEviction  = 46
	RankReadiness = 48
	RankStuck     = 49
	// RankAdmission ranks gated pods after every failure and before a start: a crash loop among
	// admitted pods is the news, a queue is the wait.
	RankAdmission = 55
	// RankWeights comes before a start's own causes: no pod exists while the cache fills.
	RankWeights = RankPulling - 2 // 57
	// RankPulling ranks a pull in progress just before a plain start: it is the start, explained.
	RankPulling  = RankStarting - 1 // 59
	RankStarting = 60
	RankPods     = 65 // fewer ready pods than wanted, and the diagnosis found nothing more precise
	RankRollout  = 70
	// RankStale: what pods that no longer count say (terminated, or of an older ReplicaSet):
	// after every cause that decides, so it is only ever mentioned.
	RankStale  = 75
	RankActing = 80
	// RankServing is added to the rank of a rollout's causes while spec.replicas pods serve:
	// they are the rollout's (Progressing), never the model's readiness (Ready stays True).
	RankServing = 100
	// RankQueueChange: only ever said beside what the model's pods say; while they serve,
	// Ready stays True and Progressing carries it.
	RankQueueChange = RankServing + 80 // 180
	// RankRouteConflict orders the conflict among the causes of a serving model: after its
	// rollout's diagnosis, before its adapters.
	RankRouteConflict = RankServing + 85 // 185
	// RankAdapters orders adapter causes after every rollout cause, also while the model serves:
	// the base model answering is worth more than an adapter.
	RankAdapters = RankServing + 90 // 190
)

// Condition reasons. They are API: dashboards and alerts match on them.
const (
	// ReasonAvailable: at least spec.replicas pods are ready and every child matches the spec.
	ReasonAvailable = "Available"
	// ReasonScaledToZero: spec.replicas is 0; nothing runs and nothing is expected to.
	ReasonScaledToZero = "ScaledToZero"
	// ReasonReconciling: the operator is creating, updating or deleting children.
	ReasonReconciling = "Reconciling"
	// ReasonRolloutInProgress: the Deployment is rolling out a new pod template.
	ReasonRolloutInProgress = "RolloutInProgress"
	// ReasonReplicasNotReady: children match the spec but fewer than spec.replicas pods are ready.
	ReasonReplicasNotReady = "ReplicasNotReady"
	// ReasonChildConflict: a same-named child exists that this InferenceService does not control.
	ReasonChildConflict = "ChildConflict"
	// ReasonInvalidSpec: the stored object breaks a validation rule (stored before the rule existed).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonForbidden: the operator's RBAC does not allow an action on a child.
	ReasonForbidden = "Forbidden"
	// ReasonNamespaceTerminating: the namespace is being deleted, and the API server refuses
	// new objects in it; the model goes with it, nothing to fix.
	ReasonNamespaceTerminating = "NamespaceTerminating"
	// ReasonAdmissionDenied: an admission webhook or policy refused a write to a child (Kueue
	// keeps a serving Deployment's queue label fixed, a policy engine refuses a field).
	ReasonAdmissionDenied = "AdmissionDenied"
	// ReasonReconcileError: an API call failed; the operator retries with backoff.
	ReasonReconcileError = "ReconcileError"
	// ReasonConverged: Progressing is False because nothing is left to do.
	ReasonConverged = "Converged"
	// ReasonDeleting: the InferenceService is being deleted.
	ReasonDeleting = "Deleting"
	// ReasonRegistered / ReasonGatewayUnavailable: the gateway registration's outcome.
	ReasonRegistered         = "Registered"
	ReasonGatewayUnavailable = "GatewayUnavailable"
)

// Reasons of the AdaptersReady condition; the failing ones also become the status reason
// (with Ready still True while the base model serves) and a Warning Event.
const (
	// ReasonAdaptersLoaded: every ready pod that answered lists every adapter.
	ReasonAdaptersLoaded = "AdaptersLoaded"
	// ReasonAdaptersLoading: loads are planned and not seen on every pod yet.
	ReasonAdaptersLoading = "AdaptersLoading"
	// ReasonAdaptersNotObserved: no ready pod answered /v1/models, so nothing is claimed.
	ReasonAdaptersNotObserved = "AdaptersNotObserved"
	// ReasonAdapterLoadFailed: a pod's server refused to load an adapter; its message is kept.
	ReasonAdapterLoadFailed = "AdapterLoadFailed"
	// ReasonAdapterSourceUnsupported: an adapter's storageURI is not one vLLM can load from.
	ReasonAdapterSourceUnsupported = "AdapterSourceUnsupported"
)

// Reasons of the AutoscalingActive condition. True and False carry the HPA's own reasons
// (ValidMetricFound, FailedGetPodsMetric, TooManyReplicas, ...), which the HPA controller names.
const (
	// ReasonAutoscalerNotReported: the HPA is not seen yet, is not ours, or has not said
	// whether it reads its metric; nothing is claimed.
	ReasonAutoscalerNotReported = "AutoscalerNotReported"
	// ReasonTooManyReplicas is the HPA's ScalingLimited reason at its maximum: with the queue
	// still above target, the model needs more replicas than it may have.
	ReasonTooManyReplicas = "TooManyReplicas"
	// ReasonAwaitingReadyPod: the HPA cannot read the queue before a pod serves, nor before its
	// next sync after one does; its failure then is the model starting, not the metric missing.
	ReasonAwaitingReadyPod = "AwaitingReadyPod"
	// ReasonFailedGetPodsMetric is the HPA controller's ScalingActive reason for a Pods metric it
	// cannot get; said before the HPA reports when the custom metrics API is known not served.
	ReasonFailedGetPodsMetric = "FailedGetPodsMetric"
)

// Reasons of the managed weights cache (spec.cache with size).
const (
	// ReasonWeightsDownloading: the managed cache is being filled; no pod starts before it is.
	ReasonWeightsDownloading = "WeightsDownloading"
	// ReasonWeightsDownloadFailed: the fill Job gave up (its retries or its deadline spent).
	ReasonWeightsDownloadFailed = "WeightsDownloadFailed"
)

// Reasons found by the layer diagnosis (Deployment -> ReplicaSet -> Pods), the runbook's table done
// by the controller.
const (
	// ReasonQuotaExceeded: a ResourceQuota refused the ReplicaSet's pods (FailedCreate).
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonLimitRangeRefused: a LimitRange refused the pods' requests or limits.
	ReasonLimitRangeRefused = "LimitRangeRefused"
	// ReasonPodCreationRefused: any other refusal of pod creation (admission webhook, PodSecurity...).
	ReasonPodCreationRefused = "PodCreationRefused"
	// ReasonInsufficientGPU: the scheduler finds no node with enough free GPUs.
	ReasonInsufficientGPU = "InsufficientGPU"
	// ReasonUnschedulable: the scheduler cannot place a pod for another reason (taints, affinity...).
	ReasonUnschedulable = "Unschedulable"
	// ReasonImagePullFailed: ErrImagePull, ImagePullBackOff or an invalid image name.
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonContainerCreateFailed: the kubelet cannot create the container (config, volumes).
	ReasonContainerCreateFailed = "ContainerCreateFailed"
	// ReasonOOMKilled: the model server was killed for exceeding its memory limit.
	ReasonOOMKilled = "OOMKilled"
	// ReasonCrashLoopBackOff: the model server keeps exiting.
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	// ReasonEvicted: pods were evicted from their node. Evicted pods are terminal and replaced:
	// they are mentioned, never the reason.
	ReasonEvicted = "Evicted"
	// ReasonReadinessProbeFailing: the server started but its readiness probe fails.
	ReasonReadinessProbeFailing = "ReadinessProbeFailing"
	// ReasonProgressDeadlineExceeded: the Deployment's rollout stopped progressing.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonStarting: pods are being created, scheduled, pulled or are loading weights
	// (their startup probe has not passed yet); not a failure.
	ReasonStarting = "Starting"
)

// Reasons of a long ContainerCreating.
const (
	// ReasonVolumeMountFailed: the kubelet cannot mount a volume of the pods (the weights
	// cache's PersistentVolume): FailedMount or FailedAttachVolume warnings.
	ReasonVolumeMountFailed = "VolumeMountFailed"
	// ReasonPullingImage: the node is still pulling the image (a Pulling event without its
	// Pulled); vLLM images are 10 to 20 GB. Not a failure.
	ReasonPullingImage = "PullingImage"
)

// Reasons of evictions repeated within a window.
const (
	// ReasonFrequentEviction: at least FrequentEvictions pods of the current revision were evicted
	// by their nodes within EvictionWindow.
	ReasonFrequentEviction = "FrequentEviction"
)

// Reasons of GPUs free in the cluster but on no one node.
const (
	// ReasonGPUFragmented: enough GPUs are free in the cluster for a replica, but not on one node.
	ReasonGPUFragmented = "GPUFragmented"
)

// Reasons of a GPU fault, read from the node and the crash log.
const (
	// ReasonGPUError: the model's container dies of a GPU fault on its node.
	ReasonGPUError = "GPUError"
)

// Reasons of vLLM's refusal to split the model over its GPUs.
const (
	// ReasonParallelismRefused: vLLM refuses to split the model over the replica's GPUs.
	ReasonParallelismRefused = "ParallelismRefused"
)

// Reasons of the scheduling layer beyond ReasonInsufficientGPU and ReasonUnschedulable.
const (
	// ReasonWaitingForAdmission: the pods are held by scheduling gates (Kueue's admission gate
	// or another queue's) until a quota admits them; queued, not failed.
	ReasonWaitingForAdmission = "WaitingForAdmission"
	// ReasonUntoleratedTaint: most nodes carry a taint the pods do not tolerate (a GPU node
	// taint, or one a GPU health check set).
	ReasonUntoleratedTaint = "UntoleratedTaint"
	// ReasonNodeSelectorMismatch: most nodes do not match the pods' node selector or affinity
	// (set by admission, e.g. a Kueue ResourceFlavor's node labels).
	ReasonNodeSelectorMismatch = "NodeSelectorMismatch"
	// ReasonVolumeClaimUnbound: a PersistentVolumeClaim the pods mount (spec.cache) is not
	// bound, so no node can be chosen.
	ReasonVolumeClaimUnbound = "VolumeClaimUnbound"
)

// Reasons of the Admitted condition beyond ReasonWaitingForAdmission.
const (
	// ReasonAdmitted: Kueue admitted every pod of the model within its ClusterQueue's own quota.
	ReasonAdmitted = "Admitted"
	// ReasonBorrowingQuota: every pod is admitted, and the ClusterQueue that admitted them is
	// borrowing from its cohort, which may reclaim the quota by preempting its workloads.
	ReasonBorrowingQuota = "BorrowingQuota"
	// ReasonPreempting: a pod waits while Kueue preempts other workloads to make room for it.
	ReasonPreempting = "Preempting"
	// ReasonNoPods: the model has no pods for Kueue to admit.
	ReasonNoPods = "NoPods"
)

// Reasons of a multi-node model (spec.multiNode).
const (
	// ReasonMultiNodeUnsupported: a multi-node spec on a cluster without LeaderWorkerSet.
	ReasonMultiNodeUnsupported = "MultiNodeUnsupported"
)

// Reasons of a change of Kueue queue (spec.queueName).
const (
	// ReasonQueueChangeWaiting: spec.queueName changed, and Kueue refuses to move the running
	// Deployment's pods to another queue now; the other changes land meanwhile.
	ReasonQueueChangeWaiting = "QueueChangeWaiting"
)

// Reasons of a model whose deleted namesake is still going.
const (
	// ReasonReplacingPrevious: children of a deleted InferenceService of the same name are still
	// being garbage-collected; this one's are created as soon as they are gone.
	ReasonReplacingPrevious = "ReplacingPrevious"
)

// Reasons of a gateway route that takes another model's requests.
const (
	// ReasonRouteConflict: another model's gateway route takes, or may take, this model's
	// requests (the same path, or a shorter one with a higher priority), or this model's route
	// takes another's. Named on both models' status and in a Warning Event on each.
	ReasonRouteConflict = "RouteConflict"
)

// Reasons of the Routed condition.
const (
	// ReasonPoolRoute: the HTTPRoute sends requests to the InferencePool; its picker serves and
	// the pool has ready pods.
	ReasonPoolRoute = "InferencePoolRoute"
	// ReasonActivatorRoute: the HTTPRoute sends requests to the activator, which holds them
	// while the model is at zero (spec.autoscaling.minReplicas 0).
	ReasonActivatorRoute = "ActivatorRoute"
	// ReasonServiceRoute: the HTTPRoute sends requests to the model's Service (the cluster
	// serves no InferencePool API, or the operator runs with --inference-pool=off).
	ReasonServiceRoute = "ServiceRoute"
	// ReasonPickerUnavailable: the pool's endpoint picker is not ready; requests go to the
	// Service meanwhile.
	ReasonPickerUnavailable = "PickerUnavailable"
	// ReasonPoolNotAccepted: a Gateway refused the InferencePool, or none has accepted it yet.
	ReasonPoolNotAccepted = "PoolNotAccepted"
	// ReasonNoPoolEndpoints: no ready pod matches the pool's selector.
	ReasonNoPoolEndpoints = "NoPoolEndpoints"
	// ReasonRouteNotAccepted: the parent Gateway has not accepted the HTTPRoute.
	ReasonRouteNotAccepted = "RouteNotAccepted"
	// ReasonRouteRefsUnresolved: the parent Gateway cannot resolve the HTTPRoute's backends,
	// or has not said it can (no ResolvedRefs condition for the route's generation).
	ReasonRouteRefsUnresolved = "RouteRefsUnresolved"
	// ReasonGatewayPolicyPending: the gateway needs a policy for the pool (an Istio
	// DestinationRule, a GKE HealthCheckPolicy) that is not in place yet.
	ReasonGatewayPolicyPending = "GatewayPolicyPending"
)

// Reasons of the AutoscalingActive condition under KEDA (--autoscaler=keda).
const (
	// ReasonKEDANotReported: KEDA has not said whether the ScaledObject works (no Ready condition:
	// KEDA not running, or not yet); nothing is claimed.
	ReasonKEDANotReported = "KEDANotReported"
	// ReasonKEDANotServed: --autoscaler=keda, but KEDA's CRD is not served, so the HPA scales
	// the model; the condition's status is still the HPA's. A reason of its own, because a
	// message-only change is not written (queueMoved).
	ReasonKEDANotServed = "KEDANotServed"
)

// failing reasons need someone to act (raise a quota, fix an image, free GPUs): phase Failed
// and Progressing False. The others resolve by themselves or by the operator's retries.
var failing = map[string]bool{
	ReasonInvalidSpec: true, ReasonMultiNodeUnsupported: true, ReasonChildConflict: true, ReasonForbidden: true, ReasonAdmissionDenied: true,
	ReasonQuotaExceeded: true, ReasonLimitRangeRefused: true, ReasonPodCreationRefused: true,
	ReasonInsufficientGPU: true, ReasonUnschedulable: true, ReasonUntoleratedTaint: true, ReasonNodeSelectorMismatch: true,
	ReasonVolumeClaimUnbound: true, ReasonFrequentEviction: true, ReasonGPUError: true, ReasonVolumeMountFailed: true, ReasonGPUFragmented: true, ReasonImagePullFailed: true,
	ReasonContainerCreateFailed: true, ReasonOOMKilled: true, ReasonCrashLoopBackOff: true, ReasonParallelismRefused: true,
	ReasonEvicted: true, ReasonRouteConflict: true, ReasonReadinessProbeFailing: true, ReasonProgressDeadlineExceeded: true,
	ReasonAdapterLoadFailed: true, ReasonAdapterSourceUnsupported: true,
	ReasonWeightsDownloadFailed: true,
}

// IsFailing reports whether a Ready reason means the model cannot serve without a change.
func IsFailing(reason string) bool { return failing[reason] }

// IsWarning reports whether a status reason deserves a Warning Event when it appears.
func IsWarning(reason string) bool {
	return failing[reason] || reason == ReasonReconcileError || reason == ReasonGatewayUnavailable
}
