package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// s3Key and s3Secret are the local S3 server's only credentials.
const s3Key, s3Secret = "AKIALOCALWEIGHTS", "local-weights-secret"

// startS3 runs the local S3 server (test/s3: gofakes3 behind S3's SigV4 check; S3_BIN, else
// built by test/s3/build.sh, cached) on a loopback port until the test ends, seeded with the
// files under seed (seed/BUCKET/KEY), and returns its endpoint URL.
func startS3(t *testing.T, seed string) string {
	t.Helper()
	bin := os.Getenv("S3_BIN")
	if bin == "" {
		bin = filepath.Join(env.Root, "test", "s3", "bin", "s3")
		out, err := exec.CommandContext(testenv.Ctx(t, 10*time.Minute), filepath.Join(env.Root, "test", "s3", "build.sh"), bin).CombinedOutput()
		if err != nil {
			t.Fatalf("building the S3 server: %v\n%s", err, out)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--listen", "127.0.0.1:0", "--credentials", s3Key+":"+s3Secret, "--seed", seed)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(t.TempDir(), "s3.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		b, _ := os.ReadFile(logf.Name())
		t.Logf("S3 server's log:\n%s", b)
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	endpoint, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		t.Fatalf("S3 server: %q %v", line, err)
	}
	return endpoint
}

// TestWeightsFromS3 is issue 50's item 9: a managed cache filled from an s3:// source on the
// local S3 server, with the credentials a Secret gives the fill (boto3's AWS_* names), its
// progress read as the hub fill's, and the model Ready on the copied directory, served under
// its own name; a Secret with a wrong secret key ends the fill at once, and Ready says so in
// botocore's words, naming the Secret.
func TestWeightsFromS3(t *testing.T) {
	w := useWebhookCRD(t)
	start := time.Now()
	seed := t.TempDir()
	dir := filepath.Join(seed, "models", "Qwen3-0.6B")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"config.json":             `{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}`,
		"model.safetensors":       strings.Repeat("w", 2_000_000),
		"tokenizer.json":          `{"version": "1.0"}`,
		"sub/chat_template.jinja": "{{ messages }}",
	}
	var total int64
	for name, data := range files {
		total += int64(len(data))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// a sibling prefix the fill must not copy
	if err := os.MkdirAll(filepath.Join(seed, "models", "Qwen3-0.6B-old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(seed, "models", "Qwen3-0.6B-old", "model.safetensors"), []byte(strings.Repeat("o", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	endpoint := startS3(t, seed)
	t.Logf("S3 server at %s", endpoint)

	secret := func(t *testing.T, ns, name, key, secretKey string) {
		t.Helper()
		applyYAML(t, ns, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %s}
stringData:
  AWS_ACCESS_KEY_ID: %s
  AWS_SECRET_ACCESS_KEY: %s
  AWS_ENDPOINT_URL: %s
  AWS_DEFAULT_REGION: us-east-1
`, name, key, secretKey, endpoint))
	}
	apply := func(t *testing.T, ns, name, class, secretName string) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "isvc.yaml")
		y := fmt.Sprintf(`apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: %s}
spec:
  baseModel: Qwen/Qwen3-0.6B
  replicas: 1
  gpusPerReplica: 1
  cache:
    size: 10Gi
    storageClassName: %s
    source: s3://models/Qwen3-0.6B
    credentialsSecret: {name: %s}
`, name, class, secretName)
		if err := os.WriteFile(f, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", f)
	}
	claim := reconcile.WeightsClaimName("s3://models/Qwen3-0.6B", "")

	t.Run("group", func(t *testing.T) {
		t.Run("FromSecret", func(t *testing.T) {
			t.Parallel()
			ns := modelNamespace(t)
			// 2 MB at 2 kB/s: 1000 s modelled, about 10 s at the suite's scale
			pv := slowVolume(t, ns, "s3", 0.002)
			secret(t, ns, "s3-creds", s3Key, s3Secret)
			apply(t, ns, "qwen", pv, "s3-creds")
			figure := regexp.MustCompile(`^downloading s3://models/Qwen3-0\.6B: ([0-9.]+ [kMG]?B) of 2\.0 MB`)
			testenv.Eventually(t, 2*time.Minute, "the s3 fill's progress in status", func() error {
				i, err := env.ISVC(ns, "qwen")
				if err != nil {
					return err
				}
				b, err := getV1beta1(t, ns, "qwen")
				if err != nil {
					return err
				}
				msg := readyMessage(i)
				c := b.Status.Cache
				if i.Status.Reason != reconcile.ReasonWeightsDownloading || !figure.MatchString(msg) || c == nil || c.Claim != claim || c.TotalBytes != total {
					return fmt.Errorf("%s %q cache %+v", i.Status.Reason, msg, c)
				}
				t.Logf("%5.1fs %s (status.cache %+v)", time.Since(start).Seconds(), msg, *c)
				return nil
			})
			env.WaitPhase(t, ns, "qwen", crd.PhaseReady, 3*time.Minute) // on the copied directory
			t.Logf("qwen Ready %.1fs into the test", time.Since(start).Seconds())
			d, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), "qwen", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if args := d.Spec.Template.Spec.Containers[0].Args; args[0] != crd.CachePath+"/s3/models/Qwen3-0.6B" || !strings.Contains(strings.Join(args, " "), "--served-model-name Qwen/Qwen3-0.6B") {
				t.Errorf("vLLM's arguments %v", args)
			}
			if b, err := getV1beta1(t, ns, "qwen"); err != nil || b.Status.Cache == nil || b.Status.Cache.Phase != crd.CacheFilled {
				t.Errorf("status.cache: %v %+v", err, b)
			}
		})
		t.Run("WrongSecret", func(t *testing.T) {
			t.Parallel()
			ns := modelNamespace(t)
			pv := slowVolume(t, ns, "s3bad", 1)
			secret(t, ns, "s3-wrong", s3Key, "not-the-secret")
			apply(t, ns, "qwen", pv, "s3-wrong")
			testenv.Eventually(t, 2*time.Minute, "the store's refusal in status, naming the Secret", func() error {
				i, err := env.ISVC(ns, "qwen")
				if err != nil {
					return err
				}
				msg := readyMessage(i)
				if i.Status.Reason != reconcile.ReasonWeightsDownloadFailed || !strings.Contains(msg, "An error occurred (SignatureDoesNotMatch) when calling the ListObjectsV2 operation") ||
					!strings.Contains(msg, "Secret s3-wrong") {
					return fmt.Errorf("%s %q", i.Status.Reason, msg)
				}
				t.Logf("%.1fs: %s", time.Since(start).Seconds(), msg)
				return nil
			})
			pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: reconcile.WeightsLabel + "=" + claim})
			if err != nil || len(pods.Items) != 1 {
				t.Errorf("fill pods: %v %d, want 1 (a refusal is not retried)", err, len(pods.Items))
			}
		})
		// The Secret not there yet: the kubelet cannot start the fill, and the status says why
		// in its words (not a bare wait); once the Secret is made, the fill runs.
		t.Run("MissingSecret", func(t *testing.T) {
			t.Parallel()
			ns := modelNamespace(t)
			pv := slowVolume(t, ns, "s3none", 1)
			apply(t, ns, "qwen", pv, "s3-later")
			testenv.Eventually(t, 2*time.Minute, "the kubelet's refusal in status, naming the Secret", func() error {
				i, err := env.ISVC(ns, "qwen")
				if err != nil {
					return err
				}
				msg := readyMessage(i)
				if i.Status.Reason != reconcile.ReasonWeightsDownloading || !strings.Contains(msg, `CreateContainerConfigError: secret "s3-later" not found`) {
					return fmt.Errorf("%s %q", i.Status.Reason, msg)
				}
				t.Logf("%.1fs: %s", time.Since(start).Seconds(), msg)
				return nil
			})
			secret(t, ns, "s3-later", s3Key, s3Secret)
			env.WaitPhase(t, ns, "qwen", crd.PhaseReady, 3*time.Minute) // once the Secret is there
		})
	})
}
