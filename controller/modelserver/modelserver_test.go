package modelserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/controller/engine/sglang"
	"github.com/example/inferenceservice-operator/controller/engine/vllm"
)

// The adapter endpoints of each engine, as their packages declare them.
var (
	vllmAPI   = vllm.VLLM{}.Server().Adapters
	sglangAPI = sglang.SGLang{}.Server().Adapters
)

// server is a model server on 127.0.0.1 recording the requests it answers.
type server struct {
	mu   sync.Mutex
	reqs []string // "METHOD path body"
}

func start(t *testing.T, h func(w http.ResponseWriter, r *http.Request, body string)) (*server, *Client, string) {
	t.Helper()
	s := &server{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Method+" "+r.URL.Path+" "+string(b))
		s.mu.Unlock()
		h(w, r, string(b))
	}))
	t.Cleanup(ts.Close)
	host, port, _ := net.SplitHostPort(ts.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return s, New(Options{Port: p, Timeout: time.Second, LoadTimeout: time.Second}), host
}

func TestModels(t *testing.T) {
	_, c, ip := start(t, func(w http.ResponseWriter, r *http.Request, _ string) {
		_, _ = io.WriteString(w, `{"object":"list","data":[
			{"id":"meta-llama/Llama-3.1-8B","object":"model","root":"meta-llama/Llama-3.1-8B","parent":null},
			{"id":"sql","object":"model","root":"org/sql-lora","parent":"meta-llama/Llama-3.1-8B"}]}`)
	})
	got, err := c.Models(context.Background(), ip)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Adapter() || !got[1].Adapter() || got[1].ID != "sql" || got[1].Root != "org/sql-lora" {
		t.Fatalf("models: %+v", got)
	}
}

func TestLoadAndUnloadSendVLLMsShapes(t *testing.T) {
	s, c, ip := start(t, func(w http.ResponseWriter, r *http.Request, _ string) {
		if r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusUnsupportedMediaType)
			return
		}
		_, _ = io.WriteString(w, "Success")
	})
	if _, err := c.LoadAdapter(context.Background(), vllmAPI, ip, "sql", "org/sql-lora"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UnloadAdapter(context.Background(), vllmAPI, ip, "sql"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`POST /v1/load_lora_adapter {"lora_name":"sql","lora_path":"org/sql-lora"}`,
		`POST /v1/unload_lora_adapter {"lora_name":"sql"}`,
	}
	if strings.Join(s.reqs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(s.reqs, "\n"), strings.Join(want, "\n"))
	}
}

func TestErrorsCarryTheServersMessage(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"vLLM before 0.10", `{"object":"error","message":"No adapter found for org/x","type":"NotFoundError","param":null,"code":404}`, 404, "No adapter found for org/x"},
		{"vLLM 0.10 and later", `{"error":{"message":"The lora adapter 'sql' has already been loaded.","type":"InvalidUserInput","param":null,"code":400}}`, 400, "The lora adapter 'sql' has already been loaded."},
		{"FastAPI", `{"detail":"Not Found"}`, 404, "Not Found"},
		{"SGLang", `{"success":false,"error_message":"Failed to load LoRA adapter sql: no adapter_config.json","loaded_adapters":{}}`, 400, "Failed to load LoRA adapter sql: no adapter_config.json"},
		{"plain", "runtime LoRA updating is disabled\n", 500, "runtime LoRA updating is disabled"},
		{"long", `{"message":"` + strings.Repeat("x", 2000) + `"}`, 400, strings.Repeat("x", maxMessage) + "..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c, ip := start(t, func(w http.ResponseWriter, _ *http.Request, _ string) {
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})
			_, err := c.LoadAdapter(context.Background(), vllmAPI, ip, "sql", "org/x")
			e, ok := err.(*Error)
			if !ok || e.Status != tc.status || e.Message != tc.want {
				t.Fatalf("got %#v, want status %d message %q", err, tc.status, tc.want)
			}
		})
	}
}

func TestUnloadOfAnAdapterGoneIsDone(t *testing.T) {
	_, c, ip := start(t, func(w http.ResponseWriter, _ *http.Request, _ string) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"message":"The lora adapter 'sql' cannot be found.","code":404}`)
	})
	if _, err := c.UnloadAdapter(context.Background(), vllmAPI, ip, "sql"); err != nil {
		t.Fatal(err)
	}
}

func TestBounded(t *testing.T) {
	release := make(chan struct{})
	_, c, ip := start(t, func(w http.ResponseWriter, _ *http.Request, _ string) {
		<-release // never answers in time
	})
	t.Cleanup(func() { close(release) }) // before the server's Close, which waits for the handler
	c.timeout = 50 * time.Millisecond
	if _, err := c.Models(context.Background(), ip); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("a server that does not answer: %v", err)
	}

	_, c, ip = start(t, func(w http.ResponseWriter, _ *http.Request, _ string) {
		_, _ = io.WriteString(w, `{"data":[{"id":"`+strings.Repeat("x", maxBody)+`"}]}`)
	})
	if _, err := c.Models(context.Background(), ip); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("an answer too large: %v", err)
	}
}

func TestOnlyIPs(t *testing.T) {
	c := New(Options{})
	for _, addr := range []string{"", "localhost", "model.example.com"} {
		if _, err := c.Models(context.Background(), addr); err == nil || !strings.Contains(err.Error(), "not an IP address") {
			t.Fatalf("%q: %v", addr, err)
		}
	}
}

// TestRedirectsAreNotFollowed: a pod's server runs its tenant's image, so a 3xx to another
// address, another namespace's model included, is an error the operator reports; the address
// it names is never called, and nothing of the answer's body is carried.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var mu sync.Mutex
	var victimCalls []string
	victim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		victimCalls = append(victimCalls, r.Method+" "+r.URL.Path)
		mu.Unlock()
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	}))
	t.Cleanup(victim.Close)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			_, c, ip := start(t, func(w http.ResponseWriter, r *http.Request, _ string) {
				w.Header().Set("Location", victim.URL+r.URL.Path)
				w.WriteHeader(code)
				_, _ = io.WriteString(w, `{"message":"the victim's secrets"}`)
			})
			calls := map[string]error{}
			_, calls["models"] = c.Models(context.Background(), ip)
			_, calls["load"] = c.LoadAdapter(context.Background(), vllmAPI, ip, "sql", "org/sql-lora")
			_, calls["unload"] = c.UnloadAdapter(context.Background(), vllmAPI, ip, "sql")
			for call, err := range calls {
				var e *Error
				if !errors.As(err, &e) || e.Status != code || e.Message != Redirected {
					t.Fatalf("%s answered %d: %v, want the redirect refused", call, code, err)
				}
				if strings.Contains(err.Error(), "secrets") || strings.Contains(err.Error(), victim.URL) {
					t.Fatalf("%s: the redirect's body or target carried: %v", call, err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(victimCalls) != 0 {
				t.Fatalf("the redirect's target was called: %v", victimCalls)
			}
		})
	}
}

func TestMessagesAreOneBoundedLine(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"lines", "{\"message\":\"bad\\nInferenceService ready: True\\r\\n\\tok\"}", "bad InferenceService ready: True ok"},
		{"control", "a\x00b\x1bc", "a b c"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
		{"cut on a character", strings.Repeat("x", maxMessage-1) + "é", strings.Repeat("x", maxMessage-1) + "..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := messageOf([]byte(tc.body)); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// sglangServer answers as SGLang v0.5.3's http_server.py and tokenizer manager do: the LoRA
// endpoints at the root, a LoRAUpdateOutput (200 on success, 400 otherwise) whose
// loaded_adapters is every adapter loaded after the call (the refusal of a name loaded already
// too: LoRAManager.validate_new_adapter), the registry's refusal of an unload
// of an adapter it does not have (400, no loaded_adapters), and no /v1 LoRA routes (404).
func sglangServer(loaded map[string]string) func(w http.ResponseWriter, r *http.Request, body string) {
	var mu sync.Mutex
	return func(w http.ResponseWriter, r *http.Request, body string) {
		mu.Lock()
		defer mu.Unlock()
		var req map[string]string
		_ = json.Unmarshal([]byte(body), &req)
		answer := func(ok bool, msg string) {
			out := map[string]any{"success": ok, "error_message": msg, "loaded_adapters": loaded}
			if !ok {
				w.WriteHeader(http.StatusBadRequest)
			}
			_ = json.NewEncoder(w).Encode(out)
		}
		name := req["lora_name"]
		switch r.URL.Path {
		case "/load_lora_adapter":
			switch {
			case loaded[name] != "":
				answer(false, "Failed to load LoRA adapter "+name+" because it is already loaded")
			case strings.Contains(req["lora_path"], "missing"):
				answer(false, "Failed to load LoRA adapter "+name+": "+req["lora_path"]+" not found")
			default:
				loaded[name] = req["lora_path"]
				answer(true, "")
			}
		case "/unload_lora_adapter":
			if loaded[name] == "" {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"success":false,"error_message":"LoRA with name `+name+` does not exist. Loaded LoRAs: dict_keys([])"}`)
				return
			}
			delete(loaded, name)
			answer(true, "")
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"detail":"Not Found"}`)
		}
	}
}

// TestSGLangAdapterCalls: on an SGLang model the operator calls SGLang's own endpoints with
// its bodies, reads what is loaded from each answer, carries its error_message, and takes
// SGLang's refusal to unload an adapter it does not have as the adapter unloaded.
func TestSGLangAdapterCalls(t *testing.T) {
	s, c, ip := start(t, sglangServer(map[string]string{}))
	ctx := context.Background()
	loaded, err := c.LoadAdapter(ctx, sglangAPI, ip, "sql", "org/sql-lora")
	if err != nil || len(loaded) != 1 || loaded["sql"] != "org/sql-lora" {
		t.Fatalf("load: %v %v", loaded, err)
	}
	// A name loaded already is SGLang's 400 whose words say so: the load is done, and the answer
	// lists the adapter with the path it was loaded from.
	loaded, err = c.LoadAdapter(ctx, sglangAPI, ip, "sql", "org/other-lora")
	if err != nil || len(loaded) != 1 || loaded["sql"] != "org/sql-lora" {
		t.Fatalf("a load of a name loaded already: %v %v", loaded, err)
	}
	loaded, err = c.LoadAdapter(ctx, sglangAPI, ip, "chat", "/adapters/missing")
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Message != "Failed to load LoRA adapter chat: /adapters/missing not found" ||
		loaded["sql"] != "org/sql-lora" || len(loaded) != 1 {
		t.Fatalf("a failed load: %v %v", loaded, err)
	}
	if loaded, err = c.UnloadAdapter(ctx, sglangAPI, ip, "sql"); err != nil || len(loaded) != 0 || loaded == nil {
		t.Fatalf("unload: %v %v", loaded, err)
	}
	if loaded, err = c.UnloadAdapter(ctx, sglangAPI, ip, "sql"); err != nil || loaded != nil {
		t.Fatalf("an unload of an adapter SGLang does not have: %v %v", loaded, err)
	}
	want := []string{
		`POST /load_lora_adapter {"lora_name":"sql","lora_path":"org/sql-lora"}`,
		`POST /load_lora_adapter {"lora_name":"sql","lora_path":"org/other-lora"}`,
		`POST /load_lora_adapter {"lora_name":"chat","lora_path":"/adapters/missing"}`,
		`POST /unload_lora_adapter {"lora_name":"sql"}`,
		`POST /unload_lora_adapter {"lora_name":"sql"}`,
	}
	if strings.Join(s.reqs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(s.reqs, "\n"), strings.Join(want, "\n"))
	}
	// vLLM's paths are not SGLang's: a call there is SGLang's 404, an error, never a success.
	if _, err := c.LoadAdapter(ctx, vllmAPI, ip, "sql", "org/sql-lora"); !NotFound(err) {
		t.Fatalf("vLLM's path on SGLang: %v", err)
	}
}

// TestVLLMLoadRefusalIsNotPresent: SGLang's words for a name loaded already mean nothing on
// vLLM: a 400 there is an error.
func TestVLLMLoadRefusalIsNotPresent(t *testing.T) {
	_, c, ip := start(t, func(w http.ResponseWriter, _ *http.Request, _ string) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"Failed to load LoRA adapter sql because it is already loaded","code":400}}`)
	})
	if _, err := c.LoadAdapter(context.Background(), vllmAPI, ip, "sql", "org/sql-lora"); err == nil {
		t.Fatal("a 400 on vLLM taken as loaded")
	}
}

// TestVLLMUnloadRefusalIsNotGone: SGLang's words for an adapter it does not have mean nothing
// on vLLM: a 400 there is an error.
func TestVLLMUnloadRefusalIsNotGone(t *testing.T) {
	_, c, ip := start(t, func(w http.ResponseWriter, _ *http.Request, _ string) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"LoRA with name sql does not exist","code":400}}`)
	})
	if _, err := c.UnloadAdapter(context.Background(), vllmAPI, ip, "sql"); err == nil {
		t.Fatal("a 400 on vLLM taken as unloaded")
	}
}
