package reconcile

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/example/inferenceservice-operator/controller/engine/vllm"
	"github.com/example/inferenceservice-operator/crd"
)

func TestWeightsClaimName(t *testing.T) {
	a := WeightsClaimName("Qwen/Qwen3-8B", "main")
	if a != WeightsClaimName("Qwen/Qwen3-8B", "main") || !strings.HasPrefix(a, "weights-qwen-qwen3-8b-") {
		t.Errorf("claim name %q: stable, named after the model", a)
	}
	for _, other := range []string{WeightsClaimName("Qwen/Qwen3-8B", "v2"), WeightsClaimName("qwen/qwen3-8b", "main"), WeightsClaimName("Qwen/Qwen3-0.6B", "main")} {
		if other == a {
			t.Errorf("%q names other weights too", a)
		}
	}
	long := WeightsClaimName(strings.Repeat("very-long-organisation/", 5)+"Model", "main")
	for _, n := range []string{a, long, WeightsJobName(long)} {
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			t.Errorf("%q: %v", n, errs)
		}
	}
	if !slices.Contains([]string{"main"}, WeightsRevision(&crd.SpecExtensions{})) ||
		WeightsRevision(&crd.SpecExtensions{EngineArgs: []string{"--revision", "abc"}}) != "abc" ||
		WeightsRevision(&crd.SpecExtensions{EngineArgs: []string{"--revision=def"}}) != "def" {
		t.Error("revision: main, or vLLM's --revision")
	}
}

// Lines as huggingface_hub's snapshot_download prints them with TQDM_POSITION=-1: each
// refresh on its own line, the cursor moved back up after it.
const fillLog = "Downloading (incomplete total...): 0.00B [00:00, ?B/s]\x1b[A\n" +
	"\rFetching 5 files:   0%|          | 0/5 [00:00<?, ?it/s]\x1b[A\n" +
	"\rDownloading (incomplete total...):   1%|▏         | 83.9M/16.2G [00:02<06:16, 42.7MB/s]\x1b[A\n" +
	"\rDownloading (incomplete total...):  38%|███▊      | 6.20G/16.4G [00:30<00:48, 210MB/s]\x1b[A\n" +
	"\rFetching 5 files:  20%|██        | 1/5 [00:31<02:04, 31.1s/it]\x1b[A\n"

func TestManagedCacheAdaptersAndModules(t *testing.T) {
	w := managedWorld()
	w.ext.Adapters = []crd.Adapter{{Name: "sql", StorageURI: "hf://org/sql-lora"}, {Name: "local", StorageURI: "/models/x"}, {Name: "chat", StorageURI: "hf://org/chat-lora"}}
	_, _, job := firstFill(t, w, WeightsClaimName("Qwen/Qwen3-0.6B", "main"))
	if args := job.Spec.Template.Spec.Containers[0].Args; !slices.Equal(args, []string{"Qwen/Qwen3-0.6B", "main", "org/chat-lora", "org/sql-lora"}) {
		t.Errorf("fill args %v", args)
	}
	d := desiredDeployment(w.isvc, &w.ext, shared{})
	ps := d.Spec.Template.Spec
	if !slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == ModulesVolume && v.EmptyDir != nil }) ||
		!slices.ContainsFunc(ps.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == ModulesVolume && m.MountPath == ModulesPath }) ||
		!slices.Contains(ps.Containers[0].Env, corev1.EnvVar{Name: "HF_MODULES_CACHE", Value: ModulesPath}) {
		t.Errorf("pod spec without a writable HF_MODULES_CACHE: %+v", ps)
	}
	w.ext.Cache = &crd.Cache{ClaimName: "mine"} // the user's claim is writable: nothing added
	ps = desiredDeployment(w.isvc, &w.ext, shared{}).Spec.Template.Spec
	if slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == ModulesVolume }) {
		t.Errorf("modules volume on a writable claim")
	}
}

// vllm.FillScript against a stub huggingface_hub (python3 needed; the real hub is not reachable
// here): vLLM's first format only, original/ skipped, the adapters after, and a volume too
// small refused with exit 3 before any download.
func TestFillScript(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	dir := t.TempDir()
	stub := filepath.Join(dir, "huggingface_hub")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(stub, 0o755))
	must(os.WriteFile(filepath.Join(stub, "constants.py"), []byte("import os\nHF_HUB_CACHE = os.path.join(os.environ['HF_HOME'], 'hub')\n"), 0o644))
	must(os.WriteFile(filepath.Join(stub, "__init__.py"), []byte(`import json, os
class S:
    def __init__(s, n, z): s.rfilename, s.size = n, z
REPOS = {
  "gpt2": [("config.json", 700), ("model.safetensors", 500), ("pytorch_model.bin", 500), ("tf_model.h5", 500), ("original/consolidated.00.pth", 500), ("tokenizer.json", 100)],
  "org/sql-lora": [("adapter_config.json", 10), ("adapter_model.safetensors", 40)],
}
class I:
    def __init__(s, r): s.siblings = [S(n, z) for n, z in REPOS[r]]
class HfApi:
    def model_info(s, repo, revision=None, files_metadata=False): return I(repo)
def snapshot_download(repo, revision=None, allow_patterns=None, ignore_patterns=None):
    with open(os.path.join(os.environ["HF_HOME"], "calls"), "a") as f:
        f.write(json.dumps([repo, allow_patterns, ignore_patterns]) + "\n")
`), 0o644))
	run := func(home string) (string, int) {
		cmd := exec.Command(py, "-c", vllm.FillScript, "gpt2", "main", "org/sql-lora")
		cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "HF_HOME="+home, "FILL_WEIGHT_FORMATS="+vllm.FillWeightFormats,
			"FILL_ALSO="+vllm.FillAlso, "FILL_IGNORE="+vllm.FillIgnore, "TQDM_MININTERVAL=0.05")
		out, err := cmd.CombinedOutput()
		code := 0
		if e, ok := err.(*exec.ExitError); ok {
			code = e.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	home := t.TempDir()
	out, code := run(home)
	calls, _ := os.ReadFile(filepath.Join(home, "calls"))
	want := `["gpt2", ["*.safetensors", "*.json", "*.txt", "*.model", "*.tiktoken", "*.jinja", "*.py"], ["original/**/*"]]
["org/sql-lora", null, null]
`
	if code != 0 || string(calls) != want || !strings.Contains(out, "fill: gpt2@main: 3 files in *.safetensors, 1350 bytes") {
		t.Fatalf("exit %d\n%s\ncalls:\n%s", code, out, calls)
	}
	// a volume of 1 byte: the listing's sizes say no before any download (a tmpfs has more,
	// so HF_HOME's total is faked with a stub disk_usage)
	must(os.WriteFile(filepath.Join(dir, "shutil.py"), []byte("import collections\nU = collections.namedtuple('U', 'total used free')\ndef disk_usage(p): return U(1, 0, 1)\n"), 0o644))
	home = t.TempDir()
	out, code = run(home)
	if _, err := os.Stat(filepath.Join(home, "calls")); code != fillTooSmall || err == nil || !strings.Contains(out, "needs 1350 bytes (*.safetensors and its adapters), more than the volume's 1 bytes") {
		t.Fatalf("too small: exit %d, downloaded %v\n%s", code, err == nil, out)
	}
}

// firstFill is w's first pass with a managed cache: the claim named claim and its fill Job made.
func firstFill(t *testing.T, w *world, claim string) (Output, *corev1.PersistentVolumeClaim, *batchv1.Job) {
	t.Helper()
	out := w.reconcile()
	if out.Weights.Claim != claim || len(out.Weights.Creates) != 2 {
		t.Fatalf("first pass: %+v", out.Weights)
	}
	return out, out.Weights.Creates[0].(*corev1.PersistentVolumeClaim), out.Weights.Creates[1].(*batchv1.Job)
}

func managedWorld() *world {
	w := newWorld(2)
	w.isvc.APIVersion = crd.GroupVersionV1beta1.String()
	w.ext.Cache = &crd.Cache{Size: "40Gi", TokenSecret: &crd.SecretKey{Name: "hf", Key: "token"}}
	return w
}

// The cycle of a managed cache: claim and Job made, no Deployment while it fills (progress in
// the message, a recheck), the Deployment on the filled claim read-only and offline after.
func TestManagedCacheGatesThePods(t *testing.T) {
	w := managedWorld()
	claim := WeightsClaimName("Qwen/Qwen3-0.6B", "main")
	out, pvc, job := firstFill(t, w, claim)
	if pvc.Name != claim || pvc.Labels[WeightsLabel] != claim || pvc.Spec.AccessModes[0] != corev1.ReadWriteMany ||
		len(pvc.OwnerReferences) != 1 || pvc.OwnerReferences[0].Controller != nil {
		t.Errorf("claim %+v", pvc.ObjectMeta)
	}
	c := job.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Command, []string{"python3", "-c", vllm.FillScript}) || !slices.Equal(c.Args, []string{"Qwen/Qwen3-0.6B", "main"}) ||
		job.Spec.PodFailurePolicy == nil || job.Spec.PodFailurePolicy.Rules[0].OnExitCodes.Values[0] != fillTooSmall ||
		!slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "HF_TOKEN" && e.ValueFrom.SecretKeyRef.Name == "hf" && e.ValueFrom.SecretKeyRef.Key == "token"
		}) || !slices.Contains(c.Env, corev1.EnvVar{Name: "HF_HOME", Value: crd.CachePath}) ||
		job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever || *job.Spec.BackoffLimit == 0 || job.Spec.ActiveDeadlineSeconds == nil ||
		job.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != claim {
		t.Errorf("job %+v", job.Spec)
	}
	for _, a := range out.Actions {
		if IsAnchorKind(a.Kind) {
			t.Fatalf("a Deployment before the weights: %s", verbs(out.Actions))
		}
	}
	w.apply(out.Actions)
	// filling: progress in the Ready message, looked at again in seconds
	pvc.UID, job.UID = types.UID("pvc"), types.UID("job")
	w.obs.Weights = Weights{Claim: pvc, Job: job, Log: fillLog}
	out = w.reconcile()
	ready := readyCondition(t, out)
	if ready.Reason != ReasonWeightsDownloading || !strings.Contains(ready.Message, "6.2 GB of 16.4 GB") || out.Recheck <= 0 || out.Recheck > weightsRecheck {
		t.Fatalf("filling: %s %q recheck %v", ready.Reason, ready.Message, out.Recheck)
	}
	if c := out.StatusExt.Cache; c == nil || c.Phase != crd.CacheFilling || c.Claim != claim || c.Bytes != 6_200_000_000 || c.TotalBytes != 16_400_000_000 || c.BytesPerSecond != 210e6 {
		t.Errorf("status.cache while filling: %+v", c)
	}
	if w.obs.Deployment != nil || len(out.Weights.Updates) != 0 {
		t.Fatalf("filling: deployment %v, updates %+v", w.obs.Deployment != nil, out.Weights.Updates)
	}
	// filled: the claim marked, the Deployment made on it
	done := job.DeepCopy()
	done.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	w.obs.Weights.Job = done
	out = w.reconcile()
	if c := out.StatusExt.Cache; c == nil || c.Phase != crd.CacheFilled {
		t.Errorf("status.cache filled: %+v", c)
	}
	if len(out.Weights.Updates) != 1 || out.Weights.Updates[0].Object.GetAnnotations()[WeightsFilledAnnotation] != "true" {
		t.Fatalf("filled: updates %+v", out.Weights.Updates)
	}
	w.apply(out.Actions)
	ps := w.obs.Deployment.Spec.Template.Spec
	i := slices.IndexFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == CacheVolume })
	if i < 0 || ps.Volumes[i].PersistentVolumeClaim == nil || ps.Volumes[i].PersistentVolumeClaim.ClaimName != claim || !ps.Volumes[i].PersistentVolumeClaim.ReadOnly ||
		!slices.Contains(ps.Containers[0].Env, corev1.EnvVar{Name: HFOfflineEnv, Value: "1"}) {
		t.Fatalf("deployment volumes %+v env %+v", ps.Volumes, ps.Containers[0].Env)
	}
	// the Job deleted later: the marked claim stays filled, nothing is downloaded again
	marked := out.Weights.Updates[0].Object.(*corev1.PersistentVolumeClaim)
	w.obs.Weights = Weights{Claim: marked}
	w.podsReady()
	out = w.reconcile()
	if len(out.Weights.Creates) != 0 || len(out.Weights.Updates) != 0 || readyCondition(t, out).Reason != ReasonAvailable {
		t.Fatalf("filled claim without its Job: %+v %s", out.Weights, readyCondition(t, out).Reason)
	}
}

// A second model on the same weights adopts the claim and the Job: an owner reference each,
// nothing created.
func TestManagedCacheShared(t *testing.T) {
	first := managedWorld().reconcile().Weights
	w := managedWorld()
	w.isvc.Name, w.isvc.UID = "second", "second-uid"
	pvc := first.Creates[0].(*corev1.PersistentVolumeClaim)
	job := first.Creates[1].(*batchv1.Job)
	w.obs.Weights = Weights{Claim: pvc, Job: job}
	p := w.reconcile().Weights
	if len(p.Creates) != 0 || len(p.Updates) != 2 {
		t.Fatalf("second model: %+v", p)
	}
	for _, u := range p.Updates {
		if refs := u.Object.GetOwnerReferences(); len(refs) != 2 || refs[1].UID != "second-uid" || refs[1].Controller != nil {
			t.Errorf("%s owners %+v", u.Kind, refs)
		}
	}
	// someone else's claim of that name is reported, never adopted
	foreign := pvc.DeepCopy()
	foreign.Labels = nil
	w.obs.Weights = Weights{Claim: foreign}
	out := w.reconcile()
	if len(out.Weights.Updates)+len(out.Weights.Creates) != 0 || readyCondition(t, out).Reason != ReasonChildConflict {
		t.Fatalf("foreign claim: %+v %s", out.Weights, readyCondition(t, out).Reason)
	}
}

// A fill that gave up is a failure naming the log's last words.
func TestManagedCacheFillFailed(t *testing.T) {
	w := managedWorld()
	p := w.reconcile().Weights
	job := p.Creates[1].(*batchv1.Job)
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}
	w.obs.Weights = Weights{Claim: p.Creates[0].(*corev1.PersistentVolumeClaim), Job: job, Log: "huggingface_hub.errors.GatedRepoError: 401 Client Error.\n"}
	out := w.reconcile()
	r := readyCondition(t, out)
	if r.Reason != ReasonWeightsDownloadFailed || !strings.Contains(r.Message, "GatedRepoError") || out.Status.Phase != crd.PhaseFailed {
		t.Fatalf("%s %q %s", r.Reason, r.Message, out.Status.Phase)
	}
	// too small: the fill said so before downloading, and a retry would not fit either
	job.Status.Conditions[0].Reason = "PodFailurePolicy"
	w.obs.Weights.Log = "fill: Qwen/Qwen3-0.6B@main needs 1503238553 bytes (*.safetensors and its adapters), more than the volume's 1073741824 bytes\n"
	r = readyCondition(t, w.reconcile())
	if r.Reason != ReasonWeightsDownloadFailed || !strings.Contains(r.Message, "more than the volume") || !strings.Contains(r.Message, "raise spec.cache.size") {
		t.Fatalf("too small: %s %q", r.Reason, r.Message)
	}
}

// A fill pod that cannot start says why in the kubelet's or the scheduler's words; one on its
// way says only that it waits.
func TestManagedCacheFillPodWaits(t *testing.T) {
	w := managedWorld()
	p := w.reconcile().Weights
	job := p.Creates[1].(*batchv1.Job)
	pending := func(cs []corev1.ContainerStatus, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: cs, Conditions: conds}}
	}
	waiting := func(reason, msg string) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: "fill", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"no pod", nil, "'s pod"},
		{"being made", pending(waiting("ContainerCreating", "")), "'s pod"},
		{"no Secret", pending(waiting("CreateContainerConfigError", `secret "s3-creds" not found`)),
			`'s pod, which waits CreateContainerConfigError: secret "s3-creds" not found`},
		{"no image", pending(waiting("ImagePullBackOff", `Back-off pulling image "vllm/vllm-openai:v9"`)),
			`'s pod, which waits ImagePullBackOff: Back-off pulling image "vllm/vllm-openai:v9"`},
		{"no node", pending(nil, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
			Message: "0/3 nodes are available: 3 node(s) had untolerated taint(s)."}),
			"'s pod, which is not scheduled: 0/3 nodes are available: 3 node(s) had untolerated taint(s)"},
	} {
		w.obs.Weights = Weights{Claim: p.Creates[0].(*corev1.PersistentVolumeClaim), Job: job, Pod: c.pod}
		r := readyCondition(t, w.reconcile())
		if r.Reason != ReasonWeightsDownloading || !strings.Contains(r.Message, c.want+";") {
			t.Errorf("%s: %s %q, want %q", c.name, r.Reason, r.Message, c.want)
		}
	}
}

func readyCondition(t *testing.T, out Output) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(out.Status.Conditions, crd.ConditionReady)
	if c == nil {
		t.Fatalf("no Ready condition: %+v", out.Status)
	}
	return *c
}

// A completed Job older than its claim filled a deleted claim: the new one is not filled.
func TestManagedCacheStaleJob(t *testing.T) {
	w := managedWorld()
	p := w.reconcile().Weights
	pvc, job := p.Creates[0].(*corev1.PersistentVolumeClaim), p.Creates[1].(*batchv1.Job)
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	job.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pvc.CreationTimestamp = metav1.NewTime(job.CreationTimestamp.Add(time.Hour))
	w.obs.Weights = Weights{Claim: pvc, Job: job}
	out := w.reconcile()
	if out.Weights.Filled || readyCondition(t, out).Reason != ReasonWeightsDownloadFailed || !strings.Contains(readyCondition(t, out).Message, "delete the Job") {
		t.Fatalf("stale Job: filled %v, %+v", out.Weights.Filled, readyCondition(t, out))
	}
	w.obs.Weights = Weights{Job: job} // the claim gone: never filled
	if w.reconcile().Weights.Filled {
		t.Fatal("filled without a claim")
	}
}
