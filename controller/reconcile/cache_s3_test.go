package reconcile

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/example/inferenceservice-operator/crd"
)

func s3World() *world {
	w := managedWorld()
	w.ext.Cache = &crd.Cache{Size: "20Gi", Source: "s3://models/qwen3-0.6b/", CredentialsSecret: &crd.SecretRef{Name: "s3-creds"}}
	return w
}

// An s3:// source: a claim named after the source, a boto3 fill with the Secret as its
// environment, the hub fill's progress line read, and vLLM on the copied directory under the
// model's own name.
func TestS3Source(t *testing.T) {
	w := s3World()
	claim := WeightsClaimName("s3://models/qwen3-0.6b", "")
	out, pvc, job := firstFill(t, w, claim)
	if pvc.Annotations[WeightsModelAnnotation] != "s3://models/qwen3-0.6b" {
		t.Errorf("claim annotations %v", pvc.Annotations)
	}
	c := job.Spec.Template.Spec.Containers[0]
	dir := crd.CachePath + "/s3/models/qwen3-0.6b"
	if !slices.Equal(c.Command, []string{"python3", "-c", s3FillScript}) || !slices.Equal(c.Args, []string{"s3://models/qwen3-0.6b", dir}) ||
		len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != "s3-creds" ||
		slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "HF_TOKEN" }) ||
		!slices.Equal(job.Spec.PodFailurePolicy.Rules[0].OnExitCodes.Values, []int32{fillTooSmall, fillRefused}) ||
		*job.Spec.Template.Spec.AutomountServiceAccountToken {
		t.Errorf("s3 fill job %+v", job.Spec.Template.Spec)
	}
	w.apply(out.Actions)
	w.obs.Weights = Weights{Claim: pvc, Job: job, Log: "fill: s3://models/qwen3-0.6b: 4 files, 1500000000 bytes\nfill: s3://models/qwen3-0.6b 600000000/1500000000 bytes, 100000000 bytes/s\n"}
	out = w.reconcile()
	if r := readyCondition(t, out); r.Reason != ReasonWeightsDownloading || !strings.Contains(r.Message, "downloading s3://models/qwen3-0.6b: 600.0 MB of 1.5 GB (40%)") {
		t.Fatalf("filling: %s %q", r.Reason, r.Message)
	}
	done := job.DeepCopy()
	done.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	w.obs.Weights.Job = done
	out = w.reconcile()
	w.apply(out.Actions)
	args := w.obs.Deployment.Spec.Template.Spec.Containers[0].Args
	if args[0] != dir || !slices.Contains(args, "--served-model-name") || args[slices.Index(args, "--served-model-name")+1] != "Qwen/Qwen3-0.6B" {
		t.Fatalf("vLLM args %v", args)
	}
	// the workload identity's ServiceAccount, no Secret
	w = s3World()
	w.ext.Cache.CredentialsSecret, w.ext.Cache.ServiceAccountName = nil, "weights-reader"
	ps := w.reconcile().Weights.Creates[1].(*batchv1.Job).Spec.Template.Spec
	if ps.ServiceAccountName != "weights-reader" || len(ps.Containers[0].EnvFrom) != 0 {
		t.Errorf("workload identity fill %+v", ps)
	}
}

// The store's refusal ends the fill at once and names where the credentials came from.
func TestS3FillRefused(t *testing.T) {
	w := s3World()
	p := w.reconcile().Weights
	job := p.Creates[1].(*batchv1.Job)
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "PodFailurePolicy", Message: "Container download for pod x failed with exit code 4 matching FailJob rule at index 0"}}
	w.obs.Weights = Weights{Claim: p.Creates[0].(*corev1.PersistentVolumeClaim), Job: job,
		Log: "fill: s3://models/qwen3-0.6b refused: An error occurred (SignatureDoesNotMatch) when calling the ListObjectsV2 operation: The request signature we calculated does not match the signature you provided. Check your key and signing method.\n"}
	r := readyCondition(t, w.reconcile())
	if r.Reason != ReasonWeightsDownloadFailed || !strings.Contains(r.Message, "SignatureDoesNotMatch") || !strings.Contains(r.Message, "check Secret s3-creds's AWS_ACCESS_KEY_ID") {
		t.Fatalf("%s %q", r.Reason, r.Message)
	}
}

// A pvc:// source is claimName's mount, with vLLM on the path in it; nothing is filled.
func TestPVCSource(t *testing.T) {
	w := newWorld(1)
	w.ext.Cache = &crd.Cache{Source: "pvc://weights/models/qwen3/"}
	out := w.reconcile()
	if len(out.Weights.Creates) != 0 || !out.Weights.Filled {
		t.Fatalf("pvc source made weights: %+v", out.Weights)
	}
	w.apply(out.Actions)
	ps := w.obs.Deployment.Spec.Template.Spec
	i := slices.IndexFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == CacheVolume })
	if i < 0 || ps.Volumes[i].PersistentVolumeClaim == nil || ps.Volumes[i].PersistentVolumeClaim.ClaimName != "weights" || ps.Volumes[i].PersistentVolumeClaim.ReadOnly {
		t.Fatalf("volumes %+v", ps.Volumes)
	}
	if a := ps.Containers[0].Args[0]; a != crd.CachePath+"/models/qwen3" {
		t.Fatalf("model %q", a)
	}
	w.ext.Cache = &crd.Cache{ClaimName: "weights"} // claimName alone: the Hub id, the claim as HF_HOME
	if a := desiredDeployment(w.isvc, &w.ext, shared{}).Spec.Template.Spec.Containers[0].Args[0]; a != "Qwen/Qwen3-0.6B" {
		t.Fatalf("claimName model %q", a)
	}
}

// s3FillScript against a stub boto3 (python3 needed): the objects under the prefix copied
// below DEST, a sibling prefix left alone, a key escaping DEST and the store's refusal ended
// with exit 4 in botocore's words, a volume too small with exit 3.
func TestS3FillScript(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	stubs := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(stubs, "boto3"), 0o755))
	must(os.MkdirAll(filepath.Join(stubs, "botocore"), 0o755))
	must(os.WriteFile(filepath.Join(stubs, "botocore", "__init__.py"), nil, 0o644))
	must(os.WriteFile(filepath.Join(stubs, "botocore", "config.py"), []byte("class Config:\n    def __init__(s, **kw): s.kw = kw\n"), 0o644))
	// botocore's ClientError message template, as botocore/exceptions.py spells it
	must(os.WriteFile(filepath.Join(stubs, "botocore", "exceptions.py"), []byte(`class NoCredentialsError(Exception):
    def __str__(s): return "Unable to locate credentials"
class ClientError(Exception):
    def __init__(s, response, operation_name):
        s.response = response
        e = response["Error"]
        super().__init__(f"An error occurred ({e['Code']}) when calling the {operation_name} operation: {e['Message']}")
`), 0o644))
	must(os.WriteFile(filepath.Join(stubs, "boto3", "__init__.py"), []byte(`import json, os
from botocore.exceptions import ClientError
OBJS = json.loads(os.environ["STUB_OBJECTS"])
class P:
    def paginate(s, Bucket, Prefix):
        if os.environ.get("STUB_REFUSE"):
            raise ClientError({"Error": {"Code": "SignatureDoesNotMatch", "Message": "The request signature we calculated does not match the signature you provided. Check your key and signing method."}}, "ListObjectsV2")
        yield {"Contents": [{"Key": k, "Size": n} for k, n in OBJS.items() if k.startswith(Prefix)]}
class C:
    def get_paginator(s, name): return P()
    def download_file(s, bucket, key, path):
        with open(path, "wb") as f: f.write(b"x" * OBJS[key])
def client(name, config=None):
    if os.environ.get("AWS_ENDPOINT_URL") and config.kw != {"s3": {"addressing_style": "path"}}:
        raise SystemExit("a custom endpoint not addressed path-style")
    return C()
`), 0o644))
	run := func(objs, extra string) (string, string, int) {
		dest := filepath.Join(t.TempDir(), "s3", "models", "qwen3")
		cmd := exec.Command(py, "-c", s3FillScript, "s3://models/qwen3", dest)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+stubs, "HF_HOME="+os.TempDir(), "TQDM_MININTERVAL=0.05", "AWS_ENDPOINT_URL=http://127.0.0.1:9", "STUB_OBJECTS="+objs, extra)
		out, err := cmd.CombinedOutput()
		code := 0
		if e, ok := err.(*exec.ExitError); ok {
			code = e.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), dest, code
	}
	out, dest, code := run(`{"qwen3/config.json": 7, "qwen3/model.safetensors": 50, "qwen3/sub/tokenizer.json": 3, "qwen3-old/model.safetensors": 9}`, "")
	b, _ := os.ReadFile(filepath.Join(dest, "sub", "tokenizer.json"))
	_, old := os.Stat(filepath.Join(dest, "..", "qwen3-old"))
	if code != 0 || len(b) != 3 || old == nil || !strings.Contains(out, "fill: s3://models/qwen3: 3 files, 60 bytes") || !strings.Contains(out, "fill: s3://models/qwen3 60/60 bytes") {
		t.Fatalf("copy: exit %d\n%s", code, out)
	}
	out, _, code = run(`{"qwen3/model.safetensors": 5}`, "STUB_REFUSE=1")
	if code != fillRefused || !strings.Contains(out, "fill: s3://models/qwen3 refused: An error occurred (SignatureDoesNotMatch) when calling the ListObjectsV2 operation") {
		t.Fatalf("refused: exit %d\n%s", code, out)
	}
	out, _, code = run(`{"qwen3/../../../etc/passwd": 5}`, "")
	if code != fillRefused || !strings.Contains(out, "would land outside") {
		t.Fatalf("escape: exit %d\n%s", code, out)
	}
	out, _, code = run(`{"qwen3/model.safetensors": 1e18}`, "")
	if code != fillTooSmall || !strings.Contains(out, "more than the volume's") {
		t.Fatalf("too small: exit %d\n%s", code, out)
	}
}
