package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const route = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: ns}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /ns/m/v1/completions}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /v1/completions}}}]
    backendRefs: [{group: inference.networking.k8s.io, kind: InferencePool, name: m}]
  - matches: [{path: {type: PathPrefix, value: /ns/m/}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}},
      {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-Activator-Model, value: ns/m}]}}]
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /ns}}]
    backendRefs: [{name: other, namespace: x, port: 8000, weight: 0}]
`

func parse(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestRoutesMatchAndRewrite(t *testing.T) {
	u := parse(t, route)
	if _, ok := ParentsGateway(u, "ns", "gw"); !ok {
		t.Fatal("parentRef {name: gw} in ns names Gateway ns/gw")
	}
	if _, ok := ParentsGateway(u, "other", "gw"); ok {
		t.Fatal("parentRef without namespace is the route's namespace")
	}
	rules := Rules(u)
	if len(rules) != 3 {
		t.Fatalf("rules %+v", rules)
	}
	for _, c := range []struct{ path, want, kind string }{
		{"/ns/m/v1/completions", "/v1/completions", "InferencePool"},
		{"/ns/m/v1/completions/", "/v1/completions/", "InferencePool"},
		{"/ns/m/v1/models", "/v1/models", "Service"},
		{"/ns/m/", "/", "Service"},
		{"/ns/m", "/", "Service"},
		{"/ns/mm", "/ns/mm", "other"},
		{"/nsx", "", ""},
		{"/", "", ""},
	} {
		r, ok := Match(rules, c.path)
		if c.kind == "" {
			if ok {
				t.Errorf("%s matched %+v, want no route (404)", c.path, r)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: no match", c.path)
			continue
		}
		if got := r.RewritePath(c.path); got != c.want {
			t.Errorf("%s rewritten to %s, want %s", c.path, got, c.want)
		}
		b := r.Backends[0]
		switch {
		case c.kind == "InferencePool" && !b.IsPool(), c.kind == "Service" && !b.IsService(), c.kind == "other" && b.Name != "other":
			t.Errorf("%s: backend %s, want %s", c.path, b, c.kind)
		}
	}
	if r, _ := Match(rules, "/ns/m/v1/models"); r.SetHeaders["X-Activator-Model"] != "ns/m" || len(r.SetHeaders) != 1 {
		t.Errorf("RequestHeaderModifier: %v", r.SetHeaders)
	}
	if r, _ := Match(rules, "/ns/m/v1/completions"); len(r.SetHeaders) != 0 {
		t.Errorf("a rule without the filter sets %v", r.SetHeaders)
	}
	if r, _ := Match(rules, "/ns/x"); r.Backends[0].Namespace != "x" || r.Backends[0].Port != 8000 || r.Backends[0].Weight != 0 {
		t.Errorf("backend %+v", r.Backends[0])
	}
}

// fakePicker speaks the picker's side as v1.5.0's handlers.StreamingServer does in
// FULL_DUPLEX_STREAMED mode: nothing for the headers, then, at the body's end, the headers
// answer (header mutation + dynamic metadata envoy.lb) and the body streamed back (here with
// the model rewritten, as an InferenceModelRewrite would).
type fakePicker struct {
	extprocv3.UnimplementedExternalProcessorServer
	endpoint string
	sawPath  chan string
	fail     atomic.Bool
}

func (f *fakePicker) Process(s extprocv3.ExternalProcessor_ProcessServer) error {
	var body []byte
	for {
		req, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch r := req.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			for _, h := range r.RequestHeaders.GetHeaders().GetHeaders() {
				if h.GetKey() == ":path" {
					f.sawPath <- string(h.GetRawValue())
				}
			}
		case *extprocv3.ProcessingRequest_RequestBody:
			body = append(body, r.RequestBody.GetBody()...)
			if !r.RequestBody.GetEndOfStream() {
				continue
			}
			if f.fail.Load() {
				return errors.New("no pods available")
			}
			md, _ := structpb.NewStruct(map[string]any{"envoy.lb": map[string]any{DestinationHeader: f.endpoint}})
			if err := s.Send(&extprocv3.ProcessingResponse{
				Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
					Response: &extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: &extprocv3.HeaderMutation{
						SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: DestinationHeader, RawValue: []byte(f.endpoint)}}},
					}},
				}},
				DynamicMetadata: md,
			}); err != nil {
				return err
			}
			out := []byte(strings.Replace(string(body), `"m"`, `"m-target"`, 1))
			for i := 0; i < len(out); i += 8 {
				end := min(i+8, len(out))
				if err := s.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
					Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
						StreamedResponse: &extprocv3.StreamedBodyResponse{Body: out[i:end], EndOfStream: end == len(out)},
					}}},
				}}}); err != nil {
					return err
				}
			}
		}
	}
}

func startPicker(t *testing.T, f *fakePicker) extprocv3.ExternalProcessorClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithNoProxy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return extprocv3.NewExternalProcessorClient(conn)
}

func TestPickExchange(t *testing.T) {
	f := &fakePicker{endpoint: "127.16.0.3:8000", sawPath: make(chan string, 1)}
	client := startPicker(t, f)
	body := `{"model":"m","prompt":"a long prompt that spans several chunks","max_tokens":4}`
	r := httptest.NewRequest("POST", "/ns/m/v1/completions", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := Pick(ctx, client, r, "/v1/completions", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if got := <-f.sawPath; got != "/v1/completions" {
		t.Errorf("picker saw :path %s, want the rewritten /v1/completions", got)
	}
	if p.Endpoint != f.endpoint || p.SetHeaders[DestinationHeader] != f.endpoint {
		t.Errorf("picked %+v, want %s", p, f.endpoint)
	}
	var m map[string]any
	if err := json.Unmarshal(p.Body, &m); err != nil || m["model"] != "m-target" {
		t.Errorf("body passed on %q (%v), want the picker's rewrite", p.Body, err)
	}

	f.fail.Store(true)
	if _, err := Pick(ctx, client, r, "/v1/completions", []byte(body)); err == nil || !strings.Contains(err.Error(), "no pods available") {
		t.Errorf("a failing picker: err %v", err)
	}
}

// TestGrantPermits: a ReferenceGrant lets routes of its from namespace reference its to kind,
// by name or any; nothing else.
func TestGrantPermits(t *testing.T) {
	g := parse(t, `
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g, namespace: system}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: team-a}]
  to: [{group: "", kind: Service, name: activator}]
`)
	for _, c := range []struct {
		from, group, kind, name string
		want                    bool
	}{
		{"team-a", "", "Service", "activator", true},
		{"team-b", "", "Service", "activator", false},
		{"team-a", "", "Service", "other", false},
		{"team-a", "inference.networking.k8s.io", "InferencePool", "activator", false},
	} {
		if got := GrantPermits(g, c.from, c.group, c.kind, c.name); got != c.want {
			t.Errorf("%+v: %v", c, got)
		}
	}
	any := parse(t, `
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: team-a}]
  to: [{group: "", kind: Service}]
`)
	if !GrantPermits(any, "team-a", "", "Service", "whatever") {
		t.Error("a to entry without a name permits every Service")
	}
}
