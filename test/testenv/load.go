package testenv

// The load generator the suites share: clients sending OpenAI completions round robin to a
// model's pods by pod IP (as its Service would spread them), each waiting for its answer
// before the next, so the load is the clients' count of sequences in flight.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// LoadOptions say who sends what to whom.
type LoadOptions struct {
	Clients int    // concurrent clients, each with one request in flight
	Body    string // the POST /v1/completions body
	// MaxSent bounds the requests of the whole load, whatever happens; 0: no bound.
	MaxSent int64
	// Timeout bounds each request; default a minute.
	Timeout time.Duration
	// IPs is the pods to send to, asked before each request (keep it cheap: a refresher of the
	// caller's stores the list); none: the client waits a second and asks again.
	IPs func() []string
	// OnFailure hears each failed request while the load runs (not those cut by its end), on
	// the client's goroutine: err, and how many other pods there were to send to. It may wait
	// (a back-off). nil: failures are only counted.
	OnFailure func(err error, others int)
}

// Load is a running load; Stop ends it.
type Load struct {
	sent, failed atomic.Int64
	cancel       context.CancelFunc
	wg           sync.WaitGroup
}

// StartLoad starts o.Clients clients until ctx ends, Stop, or o.MaxSent requests.
func StartLoad(ctx context.Context, o LoadOptions) *Load {
	ctx, cancel := context.WithCancel(ctx)
	l := &Load{cancel: cancel}
	if o.Timeout == 0 {
		o.Timeout = time.Minute
	}
	client := &http.Client{Timeout: o.Timeout, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: o.Clients}}
	var next atomic.Int64
	for range o.Clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for ctx.Err() == nil && (o.MaxSent == 0 || l.sent.Load() < o.MaxSent) {
				list := o.IPs()
				if len(list) == 0 {
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
					continue
				}
				ip := list[int(next.Add(1))%len(list)]
				l.sent.Add(1)
				err := complete(ctx, client, ip, o.Body)
				if err != nil && ctx.Err() == nil {
					l.failed.Add(1)
					if o.OnFailure != nil {
						o.OnFailure(err, len(list)-1)
					}
				}
			}
		}()
	}
	return l
}

// complete sends one completion to the pod at ip and reads its whole answer; a status other
// than 200 is an error with the answer's start.
func complete(ctx context.Context, client *http.Client, ip, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+net.JoinHostPort(ip, strconv.Itoa(reconcile.Port))+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %.200s", resp.Status, b)
	}
	return nil
}

// Wait waits for the clients to end (their context ended or MaxSent reached).
func (l *Load) Wait() { l.wg.Wait() }

// Stop ends the load and returns the requests sent and those that failed.
func (l *Load) Stop() (sent, failed int64) {
	l.cancel()
	l.wg.Wait()
	return l.Counts()
}

// Counts are the requests sent and failed so far.
func (l *Load) Counts() (sent, failed int64) { return l.sent.Load(), l.failed.Load() }
