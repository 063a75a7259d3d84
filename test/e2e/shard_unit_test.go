package e2e

import (
	"reflect"
	"regexp"
	"testing"
)

// Files are dealt whole, longest first, to the least loaded shard; every test lands once.
func TestShards(t *testing.T) {
	byFile := map[string][]string{
		"a_test.go":       {"TestA2", "TestA1"},
		"b_test.go":       {"TestB"},
		"c_test.go":       {"TestC"},
		"d_test.go":       {"TestD"},
		"helpers_test.go": nil,
	}
	seconds := map[string]int{"a_test.go": 100, "b_test.go": 60, "c_test.go": 50}
	got := shards(byFile, seconds, 2)
	// a (100) -> 0; b (60) -> 1; c (50) -> 1 (60 < 100); d (30, unlisted) -> 0 (100 < 110).
	want := [][]string{{"TestA1", "TestA2", "TestD"}, {"TestB", "TestC"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("shards = %v, want %v", got, want)
	}
	if got := shards(byFile, seconds, 1); len(got[0]) != 5 {
		t.Errorf("one shard holds every test: %v", got)
	}
	if got := shards(byFile, seconds, 8); len(got[7]) != 0 {
		t.Errorf("more shards than files: the last is empty, got %v", got[7])
	}
}

func TestParseShard(t *testing.T) {
	for _, bad := range []string{"", "1", "2/2", "-1/2", "a/b", "0/0"} {
		if _, _, err := parseShard(bad); err == nil {
			t.Errorf("parseShard(%q) accepted", bad)
		}
	}
	if i, n, err := parseShard("1/3"); err != nil || i != 1 || n != 3 {
		t.Errorf("parseShard(1/3) = %d, %d, %v", i, n, err)
	}
}

// This package's own files: the shards' patterns together match each top-level test once.
func TestShardPatternsCoverThePackage(t *testing.T) {
	byFile, err := testsByFile(".")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, spec := range []string{"0/2", "1/2"} {
		p, err := shardPattern(spec, ".")
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(p)
		for _, tests := range byFile {
			for _, name := range tests {
				if re.MatchString(name) {
					seen[name]++
				}
			}
		}
	}
	for _, tests := range byFile {
		for _, name := range tests {
			if seen[name] != 1 {
				t.Errorf("%s is in %d shards", name, seen[name])
			}
		}
	}
	if _, ok := byFile["shard_unit_test.go"]; !ok {
		t.Error("this file's tests were not found")
	}
}
