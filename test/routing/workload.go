// The workload both routes get: multi-turn chats that share long system prompts, and requests
// spread over LoRA adapters, each bounded in count; sent through the gateway, each request
// timed from send to the end of a one-token answer (the modelled time to first token plus the
// gateway's and the picker's time).

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Workload is the shape of one run.
type Workload struct {
	Seed int64
	// Systems long system prompts (SystemWords words each) are shared by Chats chats of Turns
	// turns each; LoRARequests go to the adapters, round-robin in a shuffled order.
	Systems, SystemWords, Chats, Turns int
	Adapters                           []string
	LoRARequests                       int
	// Workers send at once; each chat's turns go in order.
	Workers int
}

// sample is one request's outcome.
type sample struct {
	kind     string // "chat" or "lora"
	latency  time.Duration
	endpoint string // the pod the gateway says served it
	err      string
}

// words makes n pseudo-words from r: the fake server tokenizes by whitespace.
func words(r *rand.Rand, n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		for j := 0; j < 3+r.Intn(6); j++ {
			b.WriteByte(letters[r.Intn(len(letters))])
		}
	}
	return b.String()
}

// job is a sequence of requests one worker sends in order: a chat's turns, or one LoRA request.
type job struct {
	kind    string
	prompts []string // a chat: each turn's whole prompt (system prompt, history, new question)
	model   string
}

func (w Workload) jobs(model string) []job {
	r := rand.New(rand.NewSource(w.Seed))
	systems := make([]string, w.Systems)
	for i := range systems {
		systems[i] = "System: " + words(r, w.SystemWords)
	}
	var out []job
	for c := 0; c < w.Chats; c++ {
		history := systems[c%len(systems)]
		j := job{kind: "chat", model: model}
		for t := 0; t < w.Turns; t++ {
			history += "\nUser: " + words(r, 12) + "\nAssistant:"
			j.prompts = append(j.prompts, history)
			history += " " + words(r, 20)
		}
		out = append(out, j)
	}
	for i := 0; i < w.LoRARequests && len(w.Adapters) > 0; i++ {
		out = append(out, job{kind: "lora", model: w.Adapters[i%len(w.Adapters)], prompts: []string{words(r, 40)}})
	}
	r.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}

// run sends the workload to url (the model's completions path through the gateway), at most
// until ctx ends.
func (w Workload) run(ctx context.Context, client *http.Client, url, model string) []sample {
	jobs := make(chan job)
	var mu sync.Mutex
	var out []sample
	var wg sync.WaitGroup
	for i := 0; i < w.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				for _, p := range j.prompts {
					s := send(ctx, client, url, j.model, p)
					s.kind = j.kind
					mu.Lock()
					out = append(out, s)
					mu.Unlock()
				}
			}
		}()
	}
	for _, j := range w.jobs(model) {
		select {
		case jobs <- j:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	return out
}

func send(ctx context.Context, client *http.Client, url, model, prompt string) sample {
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": 1})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return sample{err: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return sample{err: err.Error()}
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	s := sample{latency: time.Since(start), endpoint: resp.Header.Get("x-gateway-destination-endpoint")}
	if resp.StatusCode != http.StatusOK {
		s.err = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return s
}

// quantile of sorted durations, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// latencies are the successful samples' of a kind, sorted.
func latencies(ss []sample, kind string) []time.Duration {
	var out []time.Duration
	for _, s := range ss {
		if s.err == "" && s.kind == kind {
			out = append(out, s.latency)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}
