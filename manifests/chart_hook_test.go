package manifests

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// TestChartTestHook: the `helm test` Pod of each install shape checks what that shape runs,
// through names that resolve to it: every URL it GETs is a Service of the same render, in its
// namespace, on a port of that Service whose name is the URL's scheme (the operator's /metrics,
// http or https as metrics.secure says; the adapter's /readyz only where the adapter is
// installed); the adapter's CA comes from the Secret its Role names; with a token, the test's
// ServiceAccount is bound to the ClusterRole that allows GET /metrics; the Pod runs as the
// chart's other pods do (restricted Pod Security) and every object of it is a test hook
// deleted once it passed.
func TestChartTestHook(t *testing.T) {
	h := helm(t)
	for _, tc := range []struct {
		name    string
		values  []string
		adapter bool // the adapter's /readyz is checked
		token   bool // a ServiceAccount token is sent
	}{
		{name: "defaults", adapter: true, token: true},
		{name: "metrics insecure", values: []string{"--set", "metrics.secure=false"}, adapter: true},
		{name: "keda", values: []string{"--set", "autoscaling.metricSource=keda"}, token: true},
		{name: "namespaced", values: []string{"--set-json", `watchNamespaces=["team-a"]`, "--set", "autoscaling.metricSource=none"}, token: true},
		{name: "cert-manager in another namespace", values: []string{"--set", "metricsAdapter.certManager=true", "--namespace", "ops"}, adapter: true, token: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := parse(t, runHelm(t, h, append([]string{"template", "isvc", chartDir, "--namespace", "inferenceservice-system"}, tc.values...)...))
			release := map[string]object{}
			hooks := map[string]object{}
			for k, o := range all {
				if annotation(o, "helm.sh/hook") != "" {
					hooks[k] = o
				} else {
					release[k] = o
				}
			}
			ns := "inferenceservice-system"
			if strings.Contains(tc.name, "another namespace") {
				ns = "ops"
			}
			pod, ok := hooks["Pod "+ns+"/inferenceservice-operator-test"]
			if !ok {
				t.Fatalf("no test Pod in %s among the hooks %v", ns, keys(hooks))
			}
			for k, o := range hooks {
				if annotation(o, "helm.sh/hook") != "test" || annotation(o, "helm.sh/hook-delete-policy") != "before-hook-creation,hook-succeeded" {
					t.Errorf("%s: hook annotations %v", k, o["metadata"].(map[string]any)["annotations"])
				}
			}
			spec := pod["spec"].(map[string]any)
			c := spec["containers"].([]any)[0].(map[string]any)
			opSpec := release["Deployment "+ns+"/inferenceservice-operator"]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			op := opSpec["containers"].([]any)[0].(map[string]any)
			if c["image"] != op["image"] || !reflect.DeepEqual(c["securityContext"], op["securityContext"]) {
				t.Errorf("test container image %v securityContext %v; want the operator's %v %v", c["image"], c["securityContext"], op["image"], op["securityContext"])
			}
			if !reflect.DeepEqual(spec["securityContext"], opSpec["securityContext"]) || spec["restartPolicy"] != "Never" {
				t.Errorf("test Pod securityContext %v restartPolicy %v; want the operator's %v, Never", spec["securityContext"], spec["restartPolicy"], opSpec["securityContext"])
			}

			args := strings.Join(toStrings(c["args"]), " ")
			if !strings.HasPrefix(args, "check ") {
				t.Fatalf("args %q: want the check mode", args)
			}
			var checked []string
			for _, a := range toStrings(c["args"]) {
				flag, raw, ok := strings.Cut(a, "=")
				if !ok || (flag != "--url" && flag != "--insecure-url") {
					continue
				}
				u, err := url.Parse(raw)
				if err != nil {
					t.Fatal(err)
				}
				if flag == "--insecure-url" && !(u.Scheme == "https" && u.Path == "/metrics") {
					t.Errorf("%s skips verification: only the operator's self-signed /metrics may", a)
				}
				checked = append(checked, u.Path)
				if err := serviceServes(release, u); err != nil {
					t.Errorf("%s: %v", a, err)
				}
			}
			want := []string{"/metrics"}
			if tc.adapter {
				want = append(want, "/readyz")
				if !strings.Contains(args, "--ca-file=/var/run/metrics-adapter-ca/ca.crt") {
					t.Errorf("args %q: the adapter's URL is not verified against its CA", args)
				}
				secret := spec["volumes"].([]any)[0].(map[string]any)["secret"].(map[string]any)
				role := release["Role "+ns+"/inferenceservice-metrics-adapter"]
				if !strings.Contains(fmt.Sprint(role["rules"]), fmt.Sprint(secret["secretName"])) ||
					!reflect.DeepEqual(secret["items"], []any{map[string]any{"key": "ca.crt", "path": "ca.crt"}}) {
					t.Errorf("CA volume %v: want ca.crt alone of the Secret the adapter's Role names (%v)", secret, role["rules"])
				}
			}
			if !reflect.DeepEqual(checked, want) {
				t.Errorf("checked %v, want %v", checked, want)
			}

			sentToken := strings.Contains(args, "--bearer-token-file=/var/run/secrets/kubernetes.io/serviceaccount/token")
			if sentToken != tc.token {
				t.Errorf("token sent %v, want %v (args %q)", sentToken, tc.token, args)
			}
			if tc.token {
				b, ok := hooks["ClusterRoleBinding <nil>/inferenceservice-operator-test"]
				_, sa := hooks["ServiceAccount "+ns+"/inferenceservice-operator-test"]
				if !ok || !sa || spec["serviceAccountName"] != "inferenceservice-operator-test" {
					t.Fatalf("no test ServiceAccount and binding among the hooks %v (pod's %v)", keys(hooks), spec["serviceAccountName"])
				}
				if annotation(b, "helm.sh/hook-weight") != "-1" {
					t.Errorf("the binding is not created before the Pod: weight %q", annotation(b, "helm.sh/hook-weight"))
				}
				ref := b["roleRef"].(map[string]any)["name"]
				reader := release[fmt.Sprintf("ClusterRole <nil>/%v", ref)]
				if fmt.Sprint(reader["rules"]) != "[map[nonResourceURLs:[/metrics] verbs:[get]]]" {
					t.Errorf("the test is bound to %v with rules %v; want GET /metrics alone", ref, reader["rules"])
				}
				if fmt.Sprint(b["subjects"]) != fmt.Sprintf("[map[kind:ServiceAccount name:inferenceservice-operator-test namespace:%s]]", ns) {
					t.Errorf("binding subjects %v", b["subjects"])
				}
			} else if len(hooks) != 1 || spec["automountServiceAccountToken"] != false {
				t.Errorf("without a token: hooks %v, automountServiceAccountToken %v; want the Pod alone, no token mounted", keys(hooks), spec["automountServiceAccountToken"])
			}
		})
	}
}

// serviceServes: u's host is <service>.<namespace>.svc:<port> of a Service among objs whose
// port of that number is named as u's scheme.
func serviceServes(objs map[string]object, u *url.URL) error {
	parts := strings.Split(u.Hostname(), ".")
	if len(parts) != 3 || parts[2] != "svc" {
		return fmt.Errorf("host %q: want <service>.<namespace>.svc", u.Hostname())
	}
	svc, ok := objs["Service "+parts[1]+"/"+parts[0]]
	if !ok {
		return fmt.Errorf("no Service %s/%s in the release", parts[1], parts[0])
	}
	for _, p := range svc["spec"].(map[string]any)["ports"].([]any) {
		p := p.(map[string]any)
		if fmt.Sprint(p["port"]) == u.Port() {
			if p["name"] != u.Scheme {
				return fmt.Errorf("port %s of the Service is %v, not %s", u.Port(), p["name"], u.Scheme)
			}
			return nil
		}
	}
	return fmt.Errorf("the Service has no port %s: %v", u.Port(), svc["spec"].(map[string]any)["ports"])
}

func annotation(o object, name string) string {
	a, _ := o["metadata"].(map[string]any)["annotations"].(map[string]any)
	s, _ := a[name].(string)
	return s
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func keys(m map[string]object) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
