package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/example/inferenceservice-operator/controller/modelserver"
	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// Registrar registers a model's route with an external gateway. It is the external resource
// the finalizer cleans up: Deregister must succeed before the InferenceService may go.
type Registrar interface {
	Register(ctx context.Context, r reconcile.Route) error
	Deregister(ctx context.Context, r reconcile.Route) error
}

// HTTPRegistrar talks to a gateway's admin API: PUT and DELETE {base}/routes/{namespace}/{name}.
type HTTPRegistrar struct {
	Base   *url.URL
	Client *http.Client
}

// NewHTTPRegistrar returns a registrar for the gateway admin API at base.
func NewHTTPRegistrar(base string) (*HTTPRegistrar, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("gateway URL %q must be absolute, like http://gateway-admin:9000", base)
	}
	// A redirect is not the admin API answering: reported as its status, never followed.
	return &HTTPRegistrar{Base: u, Client: &http.Client{Timeout: 10 * time.Second, CheckRedirect: modelserver.NoRedirects}}, nil
}

func (h *HTTPRegistrar) routeURL(r reconcile.Route) string {
	return h.Base.JoinPath("routes", r.Namespace, r.Name).String()
}

// Register upserts the route; it is idempotent.
func (h *HTTPRegistrar) Register(ctx context.Context, r reconcile.Route) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return h.do(ctx, http.MethodPut, h.routeURL(r), body, false)
}

// Deregister removes the route; a route already gone counts as removed.
func (h *HTTPRegistrar) Deregister(ctx context.Context, r reconcile.Route) error {
	return h.do(ctx, http.MethodDelete, h.routeURL(r), nil, true)
}

func (h *HTTPRegistrar) do(ctx context.Context, method, u string, body []byte, notFoundOK bool) error {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.Client.Do(req)
	if err != nil {
		return fmt.Errorf("gateway %s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 == 2 || (notFoundOK && resp.StatusCode == http.StatusNotFound) {
		return nil
	}
	return fmt.Errorf("gateway %s %s: %s: %s", method, u, resp.Status, bytes.TrimSpace(msg))
}
