// The ramp's client: requests sent at the schedule's rate (an open loop: a slow server does not
// slow the sending), each a streamed completion to the model's ready pods in turn, as its
// Service spreads connections; its time to first token read from the first chunk. The
// requests in flight are bounded: one past the bound is not sent and counts as failed.

package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// loader is one model's client.
type loader struct {
	client      *http.Client
	model       string
	promptWords int
	maxTokens   int
	maxInFlight int64

	ips      atomic.Pointer[[]string] // the ready pods, refreshed by the sampler
	next     atomic.Int64
	inFlight atomic.Int64

	mu   sync.Mutex
	reqs []Request
}

func newLoader(model string, promptWords, maxTokens, maxInFlight int) *loader {
	l := &loader{model: model, promptWords: promptWords, maxTokens: maxTokens, maxInFlight: int64(maxInFlight),
		client: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: maxInFlight}}}
	l.ips.Store(&[]string{})
	return l
}

// run sends the schedule's requests from start until its end, then waits for those in flight.
func (l *loader) run(ctx context.Context, start time.Time, s Schedule) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTimer(0)
	defer t.Stop()
	at := time.Duration(0) // when the next request is due, from start
	for n := int64(0); ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rate := s.Rate(at)
		if rate <= 0 {
			return
		}
		if l.inFlight.Load() >= l.maxInFlight {
			l.record(Request{At: at, Failed: true, Why: "not sent: the client's bound"})
		} else {
			l.inFlight.Add(1)
			wg.Add(1)
			go func(n int64, at time.Duration) {
				defer wg.Done()
				defer l.inFlight.Add(-1)
				l.record(l.send(ctx, n, at))
			}(n, at)
		}
		at += time.Duration(float64(time.Second) / rate)
		t.Reset(time.Until(start.Add(at)))
	}
}

func (l *loader) record(r Request) {
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	l.mu.Unlock()
}

// requests are the requests sent so far.
func (l *loader) requests() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Request(nil), l.reqs...)
}

// send makes request n: a prompt of promptWords words, the first unique so that no two
// requests share a cached block, streamed; its time to first token is to the first chunk.
func (l *loader) send(ctx context.Context, n int64, at time.Duration) Request {
	r := Request{At: at, Failed: true, Why: "no ready pod"}
	list := *l.ips.Load()
	if len(list) == 0 {
		return r // a Service without endpoints: refused
	}
	ip := list[int(l.next.Add(1))%len(list)]
	prompt := "r" + strconv.FormatInt(n, 10) + strings.Repeat(" token", l.promptWords-1)
	body := fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":%d,"stream":true}`, l.model, prompt, l.maxTokens)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+net.JoinHostPort(ip, strconv.Itoa(reconcile.Port))+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := l.client.Do(req)
	if err != nil {
		r.Why = "connection: " + errKind(err)
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.Why = resp.Status
		return r
	}
	sc := bufio.NewScanner(resp.Body)
	first, done := false, false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		if line == "data: [DONE]" {
			done = true
			break
		}
		if !first {
			first, r.TTFT = true, time.Since(t0)
		}
	}
	r.Failed = !first || !done || sc.Err() != nil
	switch {
	case !r.Failed:
		r.Why = ""
	case sc.Err() != nil:
		r.Why = "stream cut: " + errKind(sc.Err())
	default:
		r.Why = "stream ended early"
	}
	return r
}

// errKind is an error's gist without its addresses: the last part of its message.
func errKind(err error) string {
	m := err.Error()
	if i := strings.LastIndex(m, ": "); i >= 0 {
		m = m[i+2:]
	}
	return m
}
