// Weights from object storage and from a claim's path: an s3:// source fills the managed cache
// with boto3 in the model's image; a pvc:// source serves a directory on a claim of the
// user's. Both end as a local directory vLLM loads (ModelArg).

package reconcile

import (
	"path"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/example/inferenceservice-operator/crd"
)

const (
	// fillTooSmall is the s3 fill's exit code when the weights do not fit the volume: the Job
	// fails at once (its podFailurePolicy), since a retry cannot fit them either.
	fillTooSmall = 3
	// fillRefused is the s3 fill's exit code when the store refuses it (credentials, bucket):
	// the Job fails at once (its podFailurePolicy), since a retry gets the same answer.
	fillRefused = 4
	// s3Dir is where an s3:// source's objects land on the managed claim, under CachePath:
	// s3/BUCKET/PREFIX, apart from the Hub's hub/ cache.
	s3Dir = "s3"
)

// s3Source is the cache's s3:// source, spelled s3://BUCKET or s3://BUCKET/PREFIX (no slash
// at either end of the prefix), so equal sources share one claim.
func s3Source(c *crd.Cache) (string, bool) {
	bucket, prefix, ok := c.S3()
	if !ok {
		return "", false
	}
	if prefix == "" {
		return "s3://" + bucket, true
	}
	return "s3://" + bucket + "/" + prefix, true
}

// weightsDir is the directory vLLM loads the weights from, "" when it loads a Hub id: an
// s3:// source's copy on the managed claim, or a pvc:// source's path on the user's claim.
func weightsDir(c *crd.Cache) string {
	if bucket, prefix, ok := c.S3(); ok {
		return path.Join(crd.CachePath, s3Dir, bucket, prefix)
	}
	if _, p := c.PVC(); p != "" {
		return path.Join(crd.CachePath, p)
	}
	return ""
}

// s3FillScript is the s3 fill: `python3 -c s3FillScript s3://BUCKET/PREFIX DEST`, on boto3,
// which vllm/vllm-openai ships (runai-model-streamer[s3]'s dependency). boto3 finds its
// credentials, endpoint and region itself: the Secret's AWS_* variables, or a web identity
// token a workload-identity webhook mounted. A custom endpoint (an S3-compatible store) is
// addressed path-style, which MinIO and Ceph serve without a domain of their own; botocore's
// default would put the bucket in a hostname's name (BUCKET.minio.example:9000). It lists the objects under PREFIX/ (a directory,
// as KServe's storage initializer copies it), refuses keys that would land outside DEST,
// checks their sum against the volume (exit 3), and copies each to DEST keeping its path
// below the prefix, skipping files a failed run finished. The store's refusal (credentials,
// bucket) is printed in botocore's words and exits 4. Its progress line is the hub fill's.
const s3FillScript = `import os, shutil, sys, threading, time
import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, NoCredentialsError
src, dest = sys.argv[1], sys.argv[2]
bucket, _, prefix = src[len("s3://"):].partition("/")
prefix = prefix.strip("/")
refusals = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "NoSuchBucket", "AllAccessDisabled", "InvalidBucketName", "ExpiredToken", "InvalidToken"}
def refuse(msg):
    print(f"fill: {src} refused: {msg}", flush=True)
    sys.exit(4)
custom = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
s3 = boto3.client("s3", config=Config(s3={"addressing_style": "path"}) if custom else None)
try:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/" if prefix else "")
    objs = [o for p in pages for o in p.get("Contents", []) if not o["Key"].endswith("/")]
except NoCredentialsError as e:
    refuse(e)
except ClientError as e:
    if e.response.get("Error", {}).get("Code") in refusals:
        refuse(e)
    raise
if not objs:
    refuse(f"no objects under {src}/")
for o in objs:
    o["path"] = os.path.normpath(os.path.join(dest, o["Key"][len(prefix):].lstrip("/")))
    if not o["path"].startswith(dest + "/"):
        refuse(f"the key {o['Key']} would land outside {dest}")
need = sum(o["Size"] for o in objs)
room = shutil.disk_usage(os.environ["HF_HOME"]).total
if need > room:
    print(f"fill: {src} needs {need} bytes, more than the volume's {room} bytes", flush=True)
    sys.exit(3)
print(f"fill: {src}: {len(objs)} files, {need} bytes", flush=True)
every = float(os.environ.get("TQDM_MININTERVAL", "5"))
def held():
    n = 0
    for root, _, files in os.walk(dest):
        for f in files:
            try:
                n += os.stat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return n
def watch():
    last, t = 0, time.time()
    while True:
        time.sleep(every)
        n, now = held(), time.time()
        print(f"fill: {src} {n}/{need} bytes, {max(0, n - last) / (now - t):.0f} bytes/s", flush=True)
        last, t = n, now
threading.Thread(target=watch, daemon=True).start()
for o in objs:
    if os.path.isfile(o["path"]) and os.path.getsize(o["path"]) == o["Size"]:
        continue
    os.makedirs(os.path.dirname(o["path"]), exist_ok=True)
    s3.download_file(bucket, o["Key"], o["path"])
print(f"fill: {src} {need}/{need} bytes, 0 bytes/s", flush=True)
`

// desiredS3FillJob copies an s3:// source onto the managed claim with s3FillScript, in the
// model's own image, with the credentials Secret as its environment or the ServiceAccount a
// workload identity is bound to. The service account token stays unmounted: the identity
// webhooks (IRSA, EKS Pod Identity) project their own token, and GKE's comes from the
// metadata server.
func desiredS3FillJob(isvc *crd.InferenceService, ext *crd.SpecExtensions, claim string) *batchv1.Job {
	c := ext.Cache
	src, _ := s3Source(c)
	env := []corev1.EnvVar{
		{Name: HFHomeEnv, Value: crd.CachePath},
		{Name: "TQDM_MININTERVAL", Value: "5"},
	}
	var from []corev1.EnvFromSource
	if s := c.CredentialsSecret; s != nil {
		from = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: s.Name}}}}
	}
	return fillJob(isvc, ext, claim, corev1.Container{
		Command: []string{"python3", "-c", s3FillScript},
		Args:    []string{src, weightsDir(c)},
		Env:     env,
		EnvFrom: from,
	}, fillTooSmall, fillRefused)
}

// s3Remedy is what to fix when the store refused the fill: where its credentials came from.
func s3Remedy(c *crd.Cache) string {
	switch {
	case c.CredentialsSecret != nil:
		return "check Secret " + c.CredentialsSecret.Name + "'s AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL and AWS_DEFAULT_REGION and the bucket of spec.cache.source"
	case c.ServiceAccountName != "":
		return "check what ServiceAccount " + c.ServiceAccountName + "'s workload identity may read, and the bucket of spec.cache.source"
	default:
		return "set spec.cache.credentialsSecret (or serviceAccountName for workload identity), and check the bucket of spec.cache.source"
	}
}
