package main

import "testing"

// TestBackendWeightsSplit: a rule's backendRefs share its requests in proportion to their
// weights, as the Gateway API defines weight and Envoy's weighted clusters do it (a draw per
// request below the total weight): interleaved, so a short window (a canary step's first
// requests) already sends its share to each; weight 0 never gets a request; all weights 0 (or
// none) is no backend. Requests for other rules, in between, change nothing.
func TestBackendWeightsSplit(t *testing.T) {
	g := &gateway{}
	stable, canary := Backend{Name: "stable", Weight: 80}, Backend{Name: "canary", Weight: 20}
	other := []Backend{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}}
	counts := map[string]int{}
	for w := 0; w < 20; w++ { // 20 windows of 50 requests, another route's request after each
		inWindow := 0
		for i := 0; i < 50; i++ {
			b, ok := g.chooseBackend([]Backend{stable, canary})
			if !ok {
				t.Fatal("no backend chosen")
			}
			counts[b.Name]++
			if b.Name == "canary" {
				inWindow++
			}
			g.chooseBackend(other)
		}
		if inWindow < 2 || inWindow > 20 { // 10 expected; p < 1e-3 outside for a fair draw
			t.Fatalf("window %d of 50 requests at 80/20 sent %d to the canary", w, inWindow)
		}
	}
	if c := counts["canary"]; c < 150 || c > 250 { // 200 expected of 1000
		t.Fatalf("80/20 over 1000 requests: %v", counts)
	}
	fresh, first := &gateway{}, 0
	for i := 0; i < 50; i++ { // a step's first 50 requests, no other traffic
		if b, _ := fresh.chooseBackend([]Backend{stable, canary}); b.Name == "canary" {
			first++
		}
	}
	if first < 2 || first > 20 {
		t.Fatalf("the first 50 requests at 80/20 sent %d to the canary", first)
	}
	alt := map[string]int{}
	for i := 0; i < 200; i++ { // two rules taking turns: each still splits 1:1
		b, _ := g.chooseBackend(other)
		alt[b.Name]++
		g.chooseBackend(other)
	}
	if alt["a"] < 60 || alt["b"] < 60 {
		t.Fatalf("1:1 with another rule's requests in between: %v", alt)
	}
	for i := 0; i < 1000; i++ {
		if b, _ := g.chooseBackend([]Backend{{Name: "zero", Weight: 0}, {Name: "one", Weight: 1}}); b.Name != "one" {
			t.Fatal("a backend of weight 0 got a request")
		}
	}
	if _, ok := g.chooseBackend([]Backend{{Name: "zero", Weight: 0}}); ok {
		t.Fatal("all weights 0 chose a backend")
	}
	if _, ok := g.chooseBackend(nil); ok {
		t.Fatal("no backends chose one")
	}
}
