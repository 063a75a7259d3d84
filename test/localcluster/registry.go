// A private registry: images under privateRegistry pull only with the registry's credentials in
// one of the pod's imagePullSecrets (the ServiceAccount admission plugin has added the account's
// by then), as containerd refuses an anonymous pull, in its words; every start checks, as the
// kubelet's KubeletEnsureSecretPulledImages does for an image already on the node.

package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// The private registry's host and the one account it lets pull (README.md).
const (
	privateRegistry = "registry.private.test"
	privateUser     = "model-puller"
	privatePassword = "pull-token"
)

// privateImage reports whether image is under privateRegistry.
func privateImage(image string) bool {
	host, _, ok := strings.Cut(image, "/")
	return ok && host == privateRegistry
}

// dockerConfig is the part of a .dockerconfigjson (or the older .dockercfg, the auths map
// alone) the kubelet's keyring reads.
type dockerConfig struct {
	Auths map[string]dockerAuth `json:"auths"`
}

type dockerAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
}

// credentials returns the user and password of an entry: auth (base64 user:password) wins.
func (a dockerAuth) credentials() (string, string) {
	if a.Auth != "" {
		if b, err := base64.StdEncoding.DecodeString(a.Auth); err == nil {
			u, p, _ := strings.Cut(string(b), ":")
			return u, p
		}
	}
	return a.Username, a.Password
}

// secretAuths reads a pull Secret's entries, by registry host (a scheme or path stripped).
func secretAuths(s *v1.Secret) map[string]dockerAuth {
	var auths map[string]dockerAuth
	switch s.Type {
	case v1.SecretTypeDockerConfigJson:
		var c dockerConfig
		if json.Unmarshal(s.Data[v1.DockerConfigJsonKey], &c) == nil {
			auths = c.Auths
		}
	case v1.SecretTypeDockercfg:
		_ = json.Unmarshal(s.Data[v1.DockerConfigKey], &auths)
	}
	out := map[string]dockerAuth{}
	for host, a := range auths {
		host = strings.TrimPrefix(strings.TrimPrefix(host, "https://"), "http://")
		host, _, _ = strings.Cut(host, "/")
		out[host] = a
	}
	return out
}

// pullDenial is the runtime's refusal of the container's image, or "" when the pull may go
// on: a private image needs the registry's credentials in a pull Secret the pod names. Missing
// Secrets get the kubelet's FailedToRetrieveImagePullSecret warning, as it gives it.
func (ps *podState) pullDenial(c *ctr) string {
	img := normalizedImage(c.spec.Image)
	if !privateImage(img) {
		return ""
	}
	var missing []string
	for _, ref := range ps.pod.Spec.ImagePullSecrets {
		s, err := ps.k.secret(ps.ctx, ps.pod.Namespace, ref.Name)
		if err != nil {
			missing = append(missing, ref.Name)
			continue
		}
		if u, p := secretAuths(s)[privateRegistry].credentials(); u == privateUser && p == privatePassword {
			return ""
		}
	}
	if len(missing) > 0 {
		ps.rec.Eventf(ps.pod, v1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(missing, ", "))
	}
	return fmt.Sprintf("rpc error: code = Unknown desc = failed to pull and unpack image %q: failed to resolve reference %q: pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed", img, img)
}
