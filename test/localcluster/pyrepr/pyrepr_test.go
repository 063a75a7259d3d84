package pyrepr

import "testing"

// The wants are what CPython 3.12 prints for repr() of the same values.
func TestStr(t *testing.T) {
	for in, want := range map[string]string{
		"abc":        `'abc'`,
		"it's":       `"it's"`,
		`'"`:         `'\'"'`,
		"a\rb\tc\n":  `'a\rb\tc\n'`,
		"\x7f\u0085": `'\x7f\x85'`,
		`back\slash`: `'back\\slash'`,
	} {
		if got := Str(in); got != want {
			t.Errorf("Str(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestFloat(t *testing.T) {
	for in, want := range map[float64]string{
		0: "0.0", 1: "1.0", 0.9: "0.9", 1e-05: "1e-05", 0.0001: "0.0001",
		1234567: "1234567.0", 1e16: "1e+16", 1764770000.123: "1764770000.123",
	} {
		if got := Float(in); got != want {
			t.Errorf("Float(%v) = %s, want %s", in, got, want)
		}
	}
}
