package activator

import "testing"

func TestSources(t *testing.T) {
	s, err := ParseSources(" 10.0.0.0/8, 192.168.1.7 ,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"10.1.2.3:5555":            true,
		"192.168.1.7:1":            true,
		"192.168.1.8:1":            false,
		"[fd00::1]:80":             true,
		"[::ffff:10.0.0.1]:80":     true, // IPv4 on a dual-stack listener
		"[fe80::1]:80":             false,
		"127.0.0.1:80":             false,
		"not-an-address":           false,
		"":                         false,
		"10.0.0.1":                 true,
		"[2001:db8::1]:80":         false,
		"[::ffff:192.168.1.7]:443": true,
	} {
		if got := s.Admits(addr); got != want {
			t.Errorf("Admits(%q) = %v, want %v", addr, got, want)
		}
	}
	if s.String() != "10.0.0.0/8,192.168.1.7/32,fd00::/8" {
		t.Errorf("String() = %q", s.String())
	}
	var none Sources
	if none.Admits("10.0.0.1:80") {
		t.Error("the zero Sources admitted a caller")
	}
	empty, err := ParseSources("")
	if err != nil || empty.Admits("10.0.0.1:80") {
		t.Errorf("empty: %v, admits %v", err, empty.Admits("10.0.0.1:80"))
	}
	if _, err := ParseSources("10.0.0.0/8,gateway"); err == nil {
		t.Error("a name parsed as a source")
	}
}

func TestInferencePath(t *testing.T) {
	for p, want := range map[string]bool{
		"/v1/completions":               true,
		"/v1/chat/completions":          true,
		"/v1/models":                    true,
		"/v1/models/qwen":               true,
		"/tokenize":                     true,
		"/v1/unload_lora_adapter":       false,
		"/v1/load_lora_adapter":         false,
		"/metrics":                      false,
		"/collective_rpc":               false,
		"/health":                       false,
		"/sleep":                        false,
		"/":                             false,
		"":                              false,
		"/v1/completionsX":              false,
		"/v1/completions/../../metrics": false,
		"/v1/completions/./x":           false,
		"/v1//completions":              false,
		"//v1/completions":              false,
		"/v1/completions/":              false,
		"v1/completions":                false,
	} {
		if got := InferencePath(p); got != want {
			t.Errorf("InferencePath(%q) = %v, want %v", p, got, want)
		}
	}
}
