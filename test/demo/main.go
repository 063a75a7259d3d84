// Command demo runs the operator's main job on the embedded local cluster: it starts the
// cluster, installs the default install's CRD (v1beta1 stored, v1alpha1 converted by the
// operator's webhook) and RBAC from manifests/, runs the operator with its ServiceAccount's
// token and its webhook, and walks the source document's run with kubectl.
//
//	go run ./test/demo          # the walk, then stop
//	go run ./test/demo -keep    # the walk, then keep everything up for your own kubectl
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/operator"
)

func main() {
	keep := flag.Bool("keep", false, "keep the cluster and operator running after the walk, until Ctrl-C")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("\n\033[1m==> "+format+"\033[0m\n", args...)
}

func run(ctx context.Context, keep bool) error {
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "isvc-demo-")
	if err != nil {
		return err
	}
	if !keep { // with -keep the logs (operator, metrics adapter) stay for a look after a failure
		defer os.RemoveAll(dir)
	}

	step("Building kubectl at the local cluster's version (test/kubectl, once)")
	kubectlBin, err := cluster.KubectlPath(ctx)
	if err != nil {
		return err
	}

	step("Building and starting the local cluster (the first build takes several minutes)")
	// Two engine slots a model server (vLLM's default is 256), so the autoscaling step's small
	// load makes a queue.
	c, err := cluster.Start(ctx, cluster.Options{ExtraArgs: []string{"--vllm-max-num-seqs=2"}})
	if err != nil {
		return err
	}
	defer c.Stop()
	kubectl := func(args ...string) error {
		fmt.Printf("$ kubectl %s\n", strings.Join(args, " "))
		out, stderr, err := c.Kubectl(ctx, args...)
		fmt.Print(out, stderr)
		return err
	}

	step("Installing the CRD (v1alpha1 and v1beta1, v1beta1 stored) and the operator's RBAC")
	// The default install's CRD, its conversion webhook reached by URL on loopback: the local
	// cluster's Services lead nowhere.
	webhookAddr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	crdFile, err := writeCRD(dir, "https://"+webhookAddr+crd.WebhookPath)
	if err != nil {
		return err
	}
	for _, a := range [][]string{
		{"apply", "-f", crdFile},
		{"apply", "-k", filepath.Join(root, "manifests", "rbac")},
		{"apply", "-f", filepath.Join(root, "manifests", "components", "v1beta1", "storage_migration_rbac.yaml")},
		{"wait", "--for=condition=Established", "crd/inferenceservices.ai.example.com"},
	} {
		if err := kubectl(a...); err != nil {
			return err
		}
	}

	step("Starting the operator with the ServiceAccount token the manifests grant")
	bin, err := operator.Build(ctx, dir)
	if err != nil {
		return err
	}
	sa, err := c.ServiceAccountKubeconfig(ctx, "inferenceservice-system", "inferenceservice-operator")
	if err != nil {
		return err
	}
	op, err := operator.Start(ctx, bin, filepath.Join(dir, "operator.log"), "--kubeconfig="+sa,
		"--webhook-bind-address="+webhookAddr, "--webhook-cert-dir="+filepath.Join(dir, "webhook-certs"))
	if err != nil {
		return err
	}
	defer op.Stop(30 * time.Second)
	if err := op.WaitReady(ctx, time.Minute); err != nil {
		return err
	}
	fmt.Println("operator ready; metrics on http://" + op.MetricsAddr + "/metrics")

	step("Starting the metrics adapter: the custom metrics API the HPAs read num_requests_waiting from")
	stopAdapter, err := startAdapter(ctx, c, dir, kubectl)
	if err != nil {
		return err
	}
	defer stopAdapter()

	sample := filepath.Join(root, "manifests", "samples", "qwen3.yaml")
	b, _ := os.ReadFile(sample)
	step("Five lines of YAML ship a model")
	fmt.Print(string(b))
	walk := [][]string{
		{"apply", "-f", sample},
		{"get", isvc + ",deploy,svc,hpa"},
		{"wait", "--for=condition=Ready", isvc + "/qwen3", "--timeout=60s"},
		{"get", isvc},
	}
	for _, a := range walk {
		if err := kubectl(a...); err != nil {
			return err
		}
	}
	step("Scaling 3 -> 6: the Deployment follows, the HPA becomes 3..18 with the raise held as its minimum (6) until the new pods have served 5 minutes")
	for _, a := range [][]string{
		{"patch", isvc + "/qwen3", "--type=merge", "-p", `{"spec":{"replicas":6}}`},
		{"wait", "--for=jsonpath={.spec.minReplicas}=6", "hpa/qwen3", "--timeout=60s"},
		{"wait", "--for=jsonpath={.status.readyReplicas}=6", isvc + "/qwen3", "--timeout=120s"},
		{"get", isvc + ",deploy,hpa"},
	} {
		if err := kubectl(a...); err != nil {
			return err
		}
	}
	step("A load on the model's queue: the HPA reads it through the adapter and scales up (at most 18)")
	if err := loadStep(ctx, c, kubectl); err != nil {
		return err
	}
	step("Deleting the Service by hand: the operator puts it back")
	if err := kubectl("delete", "svc/qwen3"); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, _, err := c.Kubectl(ctx, "get", "svc/qwen3"); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // poll interval
	}
	if err := kubectl("get", "svc/qwen3"); err != nil {
		return err
	}
	step("The same model read as v1alpha1: converted by the operator's webhook")
	if err := readAsV1alpha1(ctx, c, kubectl); err != nil {
		return err
	}
	step("A model pod answers: its log, then one completion through the pod's IP")
	if err := askModel(ctx, c, kubectl); err != nil {
		return err
	}
	step("What the operator recorded")
	if err := kubectl("describe", isvc+"/qwen3"); err != nil {
		return err
	}

	if !keep {
		step("Done. Run with -keep to keep the cluster up for your own kubectl.")
		return nil
	}
	step("Cluster and operator are up. In another shell:")
	fmt.Printf("  export KUBECONFIG=%s\n  %s get isvc   (isvc.ai.example.com where KServe's isvc is installed too)\n\nCtrl-C to stop.\n", c.KubeconfigPath(), kubectlBin)
	<-ctx.Done()
	return nil
}

// freeLoopbackAddr is a 127.0.0.1 address whose port was free a moment ago.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// writeCRD writes the default install's CRD, converting through url, into dir.
func writeCRD(dir, url string) (string, error) {
	b, err := yaml.Marshal(crd.DefinitionWithV1beta1(apiextensionsv1.WebhookClientConfig{URL: &url}))
	if err != nil {
		return "", err
	}
	f := filepath.Join(dir, "crd.yaml")
	return f, os.WriteFile(f, b, 0o600)
}

// readAsV1alpha1 reads qwen3 in v1alpha1, which the API server converts through the operator's
// webhook once the operator has put its CA in the CRD's caBundle (retried until then).
func readAsV1alpha1(ctx context.Context, c *cluster.Cluster, kubectl func(...string) error) error {
	args := []string{"get", "inferenceservices.v1alpha1.ai.example.com", "qwen3", "-o", "jsonpath={.apiVersion} {.spec.model} {.spec.replicas}{\"\\n\"}"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, err := c.Kubectl(ctx, args...)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // poll interval
	}
	return kubectl(args...)
}

// askModel shows one ready pod's log tail and sends it a completion, as a client inside the
// cluster would (the local cluster's pod IPs are loopback addresses).
func askModel(ctx context.Context, c *cluster.Cluster, kubectl func(...string) error) error {
	pod, _, err := c.Kubectl(ctx, "get", "pods", "-l", "ai.example.com/inferenceservice=qwen3",
		"--field-selector=status.phase=Running", "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil {
		return err
	}
	ip, _, err := c.Kubectl(ctx, "get", "pod", pod, "-o", "jsonpath={.status.podIP}")
	if err != nil {
		return err
	}
	model, _, err := c.Kubectl(ctx, "get", isvc+"/qwen3", "-o", "jsonpath={.spec.baseModel}")
	if err != nil {
		return err
	}
	if err := kubectl("logs", pod, "--tail=6"); err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": "Kubernetes operators are", "max_tokens": 12})
	url := "http://" + ip + ":8000/v1/completions"
	fmt.Printf("$ curl -s %s -H 'Content-Type: application/json' -d '%s'\n", url, body)
	reqCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return err
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") == nil {
		out = pretty.Bytes()
	}
	fmt.Printf("%s\n", out)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("completion: %s", resp.Status)
	}
	return nil
}

// isvc is the operator's resource by its short name and group: on a cluster that also runs
// KServe (same kind and short name, group serving.kserve.io) a bare "isvc" may name KServe's.
const isvc = "isvc.ai.example.com"
