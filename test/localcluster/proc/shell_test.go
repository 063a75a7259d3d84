package proc

import (
	"slices"
	"testing"
)

func TestShellLists(t *testing.T) {
	got := ShellLists(`exec python3 -m sglang.launch_server '--model-path' 'it'\''s' --x "a b" && echo done ; c\ d`)
	want := [][]string{{"python3", "-m", "sglang.launch_server", "--model-path", "it's", "--x", "a b"}, {"echo", "done"}, {"c d"}}
	if len(got) != len(want) {
		t.Fatalf("%q", got)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("%d: %q, want %q", i, got[i], want[i])
		}
	}
	if w := ShellWords("'&&' x"); !slices.Equal(w, []string{"&&", "x"}) {
		t.Fatalf("a quoted && is a word: %q", w)
	}
}
