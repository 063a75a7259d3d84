package operator

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// TestConfigurations: each manager's Configuration is one YAML document with the shared
// loopback part and its own fields, none repeated (a duplicate key fails the strict parse).
func TestConfigurations(t *testing.T) {
	for name, c := range map[string]string{
		"kueue": kueueConfiguration(1001, 1002, 1003, "/certs"),
		"lws":   loopbackConfiguration("config.lws.x-k8s.io/v1alpha1", 1001, 1002, "/certs"),
	} {
		var got struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Health     struct {
				HealthProbeBindAddress string `json:"healthProbeBindAddress"`
			} `json:"health"`
			Webhook struct {
				Host    string `json:"host"`
				Port    int    `json:"port"`
				CertDir string `json:"certDir"`
			} `json:"webhook"`
			VisibilityServer struct {
				BindAddress string `json:"bindAddress"`
				BindPort    int    `json:"bindPort"`
			} `json:"visibilityServer"`
		}
		var keys map[string]any
		if err := yaml.UnmarshalStrict([]byte(c), &keys); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, c)
		}
		if err := yaml.Unmarshal([]byte(c), &got); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, c)
		}
		if got.Kind != "Configuration" || got.Health.HealthProbeBindAddress != "127.0.0.1:1002" ||
			got.Webhook.Host != "127.0.0.1" || got.Webhook.Port != 1001 || got.Webhook.CertDir != "/certs" {
			t.Errorf("%s: %+v", name, got)
		}
		if name == "kueue" && (got.VisibilityServer.BindAddress != "127.0.0.1" || got.VisibilityServer.BindPort != 1003) {
			t.Errorf("kueue's visibility server: %+v", got.VisibilityServer)
		}
	}
}
