// Package modelserver is a small HTTP client for one model server's API, as the controller's
// adapter step uses it (controller sync -> reconcile -> controller apply): the models it serves
// (GET /v1/models) and LoRA adapters loaded and unloaded at run time, through the endpoints
// its engine declares (engine.AdapterAPI: vLLM's POST /v1/load_lora_adapter and
// /v1/unload_lora_adapter, enabled by VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; SGLang's
// /load_lora_adapter and /unload_lora_adapter). Every call is bounded in time and in the bytes read,
// and is addressed by IP: nothing here resolves a name, and no redirect is followed (the pod's
// image is its tenant's: a 307 would make the operator call, from its own network position,
// whatever the tenant names, another namespace's model included).
package modelserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// Model is one entry of GET /v1/models. An adapter has Parent set (the base model it is
// loaded on) and Root is the path it was loaded from; the base model has no Parent.
type Model struct {
	ID     string `json:"id"`
	Root   string `json:"root"`
	Parent string `json:"parent"`
}

// Adapter reports whether the entry is a LoRA adapter.
func (m Model) Adapter() bool { return m.Parent != "" }

// Defaults.
const (
	// DefaultPort is the port vLLM serves on, as the operator's Deployment runs it.
	DefaultPort = 8000
	// DefaultTimeout bounds GET /v1/models and an unload: both answer from memory.
	DefaultTimeout = 2 * time.Second
	// DefaultLoadTimeout bounds a load, which downloads and reads the adapter's weights.
	DefaultLoadTimeout = time.Minute
	// maxBody bounds what is read of an answer: 64 adapters' cards are a few KiB.
	maxBody = 1 << 20
	// maxMessage bounds a server's error message as it is carried into status.
	maxMessage = 512
)

// Client asks model servers by IP. The zero value is not usable; call New.
type Client struct {
	http        *http.Client
	port        int
	timeout     time.Duration
	loadTimeout time.Duration
	observe     func(call string, err error)
}

// Options configure a Client; zero fields take the defaults.
type Options struct {
	Port        int
	Timeout     time.Duration
	LoadTimeout time.Duration
	// Observe, when set, is told each call's outcome: call is "models", "load" or "unload";
	// err is nil on success (an unload of an adapter already gone included).
	Observe func(call string, err error)
}

// New builds a client with its own transport: no proxy from the environment (a pod IP is
// dialled directly), a dial timeout, and few idle connections per server.
func New(o Options) *Client {
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.LoadTimeout == 0 {
		o.LoadTimeout = DefaultLoadTimeout
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: o.Timeout}).DialContext,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: o.LoadTimeout,
	}
	return &Client{http: &http.Client{Transport: tr, CheckRedirect: NoRedirects}, port: o.Port, timeout: o.Timeout, loadTimeout: o.LoadTimeout, observe: o.Observe}
}

// NoRedirects is an http.Client's CheckRedirect that hands back the 3xx itself: a pod is asked
// at the address the operator chose, never at one the pod names.
func NoRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Redirected is the message of an Error for a 3xx answer; the answer's body and Location are
// not carried, since they are the pod's words about another address.
const Redirected = "a redirect, not followed (the operator calls only the pod it addressed)"

// Error is a model server's answer other than 2xx, with its message: the server's own, cut to
// maxMessage bytes on one line, or Redirected for a 3xx.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string {
	return "model server answered " + strconv.Itoa(e.Status) + ": " + e.Message
}

// NotFound reports whether err is the server's 404 (an adapter it does not have, or one it
// could not find to load).
func NotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// Models lists what the server at ip serves.
func (c *Client) Models(ctx context.Context, ip string) ([]Model, error) {
	body, err := c.do(ctx, c.timeout, http.MethodGet, ip, "/v1/models", nil)
	if err == nil {
		var list struct {
			Data []Model `json:"data"`
		}
		if err = json.Unmarshal(body, &list); err == nil {
			c.observed("models", nil)
			return list.Data, nil
		}
		err = fmt.Errorf("GET /v1/models on %s: %w", ip, err)
	}
	c.observed("models", err)
	return nil, err
}

// MetricsPage is the server's Prometheus page (GET /metrics), for a canary's judgement.
func (c *Client) MetricsPage(ctx context.Context, ip string) ([]byte, error) {
	body, err := c.do(ctx, c.timeout, http.MethodGet, ip, "/metrics", nil)
	c.observed("metrics", err)
	return body, err
}

// LoadAdapter loads the adapter at path under name through api.LoadPath. vLLM answers 400 when
// the name is already loaded and 404 when nothing is found at path; SGLang 400 for either,
// with its error_message. Where the server's refusal of a name it has says so
// (api.LoadPresent), the load is done: no error. Where the answer lists what is loaded
// (api.AnswerLists), loaded is that set after the call, name to path, whether the load
// succeeded or not (nil when the answer holds none); else nil.
func (c *Client) LoadAdapter(ctx context.Context, api engine.AdapterAPI, ip, name, path string) (loaded map[string]string, err error) {
	body, err := c.do(ctx, c.loadTimeout, http.MethodPost, ip, api.LoadPath,
		map[string]string{"lora_name": name, "lora_path": path})
	var e *Error
	if api.LoadPresent != "" && errors.As(err, &e) && e.Status == http.StatusBadRequest && strings.Contains(e.Message, api.LoadPresent) {
		err = nil
	}
	loaded = answerLoaded(api, body)
	c.observed("load", err)
	return loaded, err
}

// UnloadAdapter unloads the adapter name through api.UnloadPath; an adapter the server does not
// have (vLLM's 404, SGLang's refusal naming it missing, api.UnloadMissing) is unloaded already.
// loaded is as LoadAdapter's.
func (c *Client) UnloadAdapter(ctx context.Context, api engine.AdapterAPI, ip, name string) (loaded map[string]string, err error) {
	body, err := c.do(ctx, c.timeout, http.MethodPost, ip, api.UnloadPath, map[string]string{"lora_name": name})
	var e *Error
	if NotFound(err) || api.UnloadMissing != "" && errors.As(err, &e) && e.Status == http.StatusBadRequest && strings.Contains(e.Message, api.UnloadMissing) {
		err = nil
	}
	loaded = answerLoaded(api, body)
	c.observed("unload", err)
	return loaded, err
}

// answerLoaded is the loaded_adapters of an answer that lists them (SGLang's LoRAUpdateOutput:
// {"success", "error_message", "loaded_adapters": {name: path}}); nil for an answer without it.
func answerLoaded(api engine.AdapterAPI, body []byte) map[string]string {
	if !api.AnswerLists || len(body) == 0 {
		return nil
	}
	var out struct {
		Loaded map[string]string `json:"loaded_adapters"`
	}
	if json.Unmarshal(body, &out) != nil {
		return nil
	}
	return out.Loaded
}

func (c *Client) observed(call string, err error) {
	if c.observe != nil {
		c.observe(call, err)
	}
}

func (c *Client) do(ctx context.Context, timeout time.Duration, method, ip, path string, req any) ([]byte, error) {
	addr := net.ParseIP(ip)
	if addr == nil {
		return nil, fmt.Errorf("%s %s: %q is not an IP address", method, path, ip)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if req != nil {
		b, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	url := "http://" + net.JoinHostPort(addr.String(), strconv.Itoa(c.port)) + path
	r, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	if req != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(r)
	if err != nil {
		return nil, fmt.Errorf("%s %s on %s: %w", method, path, ip, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		return nil, &Error{Status: resp.StatusCode, Message: Redirected}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s on %s: %w", method, path, ip, err)
	}
	if len(data) > maxBody {
		return nil, fmt.Errorf("%s %s on %s: answer larger than %d bytes", method, path, ip, maxBody)
	}
	if resp.StatusCode/100 != 2 {
		// The body too: SGLang's refusals say what is loaded.
		return data, &Error{Status: resp.StatusCode, Message: messageOf(data)}
	}
	return data, nil
}

// messageOf extracts the message of a server's refusal: vLLM's ErrorResponse, {"message": ...}
// in older servers, {"error": {"message": ...}} in newer ones; SGLang's LoRAUpdateOutput,
// {"success": false, "error_message": ...}; FastAPI's {"detail": ...} for a request it
// rejected; else the body itself.
func messageOf(data []byte) string {
	var e struct {
		Message string `json:"message"`
		Error   struct {
			Message string `json:"message"`
		} `json:"error"`
		ErrorMessage string          `json:"error_message"`
		Detail       json.RawMessage `json:"detail"`
	}
	msg := ""
	if json.Unmarshal(data, &e) == nil {
		switch {
		case e.Message != "":
			msg = e.Message
		case e.ErrorMessage != "":
			msg = e.ErrorMessage
		case e.Error.Message != "":
			msg = e.Error.Message
		case len(e.Detail) > 0:
			var s string
			if json.Unmarshal(e.Detail, &s) == nil {
				msg = s
			} else {
				msg = string(e.Detail)
			}
		}
	}
	if msg == "" {
		msg = string(data)
	}
	return oneLine(msg)
}

// oneLine is a server's message as status carries it: valid UTF-8, control characters and runs
// of spaces made one space (a pod cannot add lines of its own to a condition), at most maxMessage
// bytes, cut on a character boundary.
func oneLine(msg string) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	msg = strings.Join(strings.FieldsFunc(msg, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if len(msg) <= maxMessage {
		return msg
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "..."
}
