package main

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pullSecret(name, user, password string) *v1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{"https://` + privateRegistry + `":{"auth":"` + auth + `"}}}`)}}
}

// TestPrivateRegistry: an image under the private registry is refused in containerd's words
// (ErrImagePull, then ImagePullBackOff) without the registry's credentials in a pull Secret the
// pod names, with the kubelet's warning for a Secret it cannot read and a refusal for wrong
// credentials; once the Secret holds the right ones, the next pull succeeds and the pod runs.
// An image elsewhere needs none.
func TestPrivateRegistry(t *testing.T) {
	client, ctx := ckStart(t, kubeletConfig{crashBackoffInitial: time.Second, crashBackoffMax: 2 * time.Second}, nil)
	const img = privateRegistry + "/team/server:v1"
	ckPod(t, ctx, client, "anonymous", nodeName(0), img, "")
	ckPod(t, ctx, client, "public", nodeName(0), "registry.example/server:v1", "")
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "with-secret", Namespace: "ns", UID: "uid-with-secret"},
		Spec: v1.PodSpec{NodeName: nodeName(1), ImagePullSecrets: []v1.LocalObjectReference{{Name: "regcred"}},
			Containers: []v1.Container{{Name: "server", Image: img}}}}
	if _, err := client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	denied := `pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed`
	for _, name := range []string{"anonymous", "with-secret"} {
		pollUntil(t, name+" refused", func() (bool, string) {
			p, _ := client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
			ev := ckEvents(ctx, client, name)
			ok := len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
				strings.Contains(p.Status.ContainerStatuses[0].State.Waiting.Message, denied) &&
				strings.Contains(ev, `Warning Failed Failed to pull image "`+img+`": rpc error: code = Unknown desc = failed to pull and unpack image "`+img+`"`) &&
				strings.Contains(ev, "Warning Failed Error: ErrImagePull")
			return ok, ckState(ctx, client, name) + "\n" + ev
		})
	}
	pollUntil(t, "the missing Secret warned", func() (bool, string) {
		ev := ckEvents(ctx, client, "with-secret")
		return strings.Contains(ev, "Warning FailedToRetrieveImagePullSecret Unable to retrieve some image pull secrets (regcred); attempting to pull the image may not succeed."), ev
	})
	pollUntil(t, "the public image runs", func() (bool, string) {
		s := ckState(ctx, client, "public")
		return strings.Contains(s, "running"), s
	})
	if _, err := client.CoreV1().Secrets("ns").Create(ctx, pullSecret("regcred", privateUser, "wrong"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "wrong credentials refused on the retry", func() (bool, string) {
		ev := ckEvents(ctx, client, "with-secret")
		return strings.Contains(ev, "Error: ImagePullBackOff") && strings.Contains(ckState(ctx, client, "with-secret"), "waiting:"), ckState(ctx, client, "with-secret") + "\n" + ev
	})
	if _, err := client.CoreV1().Secrets("ns").Update(ctx, pullSecret("regcred", privateUser, privatePassword), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "pulled with the Secret and running", func() (bool, string) {
		s := ckState(ctx, client, "with-secret")
		return strings.Contains(s, "running"), s + "\n" + ckEvents(ctx, client, "with-secret")
	})
	if s := ckState(ctx, client, "anonymous"); strings.Contains(s, "running") {
		t.Fatalf("a pod without the Secret pulled the private image: %s", s)
	}
}
