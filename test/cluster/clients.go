// Clients for a running cluster: kubeconfig, server, rest.Config, admin clientset, ServiceAccount kubeconfigs.

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigPath is the admin kubeconfig's path.
func (c *Cluster) KubeconfigPath() string { return c.kubeconfig }

// DataDir is the directory holding etcd data, certificates and kubeconfigs.
func (c *Cluster) DataDir() string { return c.dataDir }

// Server is the API server URL, https://127.0.0.1:PORT.
func (c *Cluster) Server() string { return c.server }

// DNS is the cluster DNS server's address (host:port on loopback), "" without one.
func (c *Cluster) DNS() string { return c.dns }

// LookupHost resolves a fully qualified name (a trailing dot: no search list) through the
// cluster DNS only, as a pod would; an error says NXDOMAIN or why the server did not answer.
func (c *Cluster) LookupHost(ctx context.Context, fqdn string) ([]string, error) {
	if c.dns == "" {
		return nil, fmt.Errorf("the cluster runs no DNS")
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, c.dns)
	}}
	return r.LookupHost(ctx, fqdn)
}

// RESTConfig returns a copy of the admin rest.Config.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.cfg) }

// Clientset returns an admin clientset.
func (c *Cluster) Clientset() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(c.RESTConfig())
}

// ServiceAccountKubeconfig issues a token for the ServiceAccount through the
// TokenRequest API (valid 2h) and writes a kubeconfig using it.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	cs, err := c.Clientset()
	if err != nil {
		return "", err
	}
	exp := int64(7200)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("TokenRequest %s/%s: %w", namespace, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["localcluster"] = &clientcmdapi.Cluster{Server: c.cfg.Host, CertificateAuthorityData: c.cfg.CAData}
	user := "system:serviceaccount:" + namespace + ":" + name
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["localcluster"] = &clientcmdapi.Context{Cluster: "localcluster", AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = "localcluster"
	dir := filepath.Join(c.dataDir, "sa-kubeconfigs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, namespace+"."+name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, nil
}
