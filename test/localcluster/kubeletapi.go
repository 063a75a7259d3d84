// The kubelet API's log endpoint, GET /containerLogs/{ns}/{pod}/{container}, over HTTPS on
// every node's InternalIP at its kubelet port: what `kubectl logs` reaches through the
// kube-apiserver. Client certificates of the cluster CA only, as a kubelet with
// --client-ca-file and no anonymous access.

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// logFollowPoll is how often a following reader looks for new lines.
const logFollowPoll = 200 * time.Millisecond

// serveKubeletAPI listens on each node's address until ctx ends.
func (k *kubelet) serveKubeletAPI(ctx context.Context, cert tls.Certificate, ca *x509.Certificate, port int, nodeCount int) error {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", k.containerLogs)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
			MinVersion:   tls.VersionTLS12,
		},
	}
	seen := map[string]bool{}
	for i := 0; i < nodeCount; i++ {
		ip := nodeIP(i)
		if seen[ip] {
			continue
		}
		seen[ip] = true
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("kubelet API on %s:%d: %w", ip, port, err)
		}
		go func() {
			if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "kubelet API stopped", "address", ln.Addr())
			}
		}()
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return nil
}

// nodeOf is the node whose address the request came in on.
func (k *kubelet) nodeOf(r *http.Request) string {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return ""
	}
	host, _, _ := net.SplitHostPort(addr.String())
	for name, i := range k.nodes {
		if nodeIP(i) == host {
			return name
		}
	}
	return ""
}

func (k *kubelet) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	pod, err := k.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && pod.Spec.NodeName != k.nodeOf(r)) {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	opts, err := parseLogOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	previous := r.URL.Query().Get("previous") == "true"
	id, err := containerLogID(pod, container, previous)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	run := k.logRun(id)
	if run == nil {
		// The run's log is gone (older than the previous run, or from before a restart).
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	out := run.log.Render(opts)
	_, _ = w.Write([]byte(out))
	if r.URL.Query().Get("follow") != "true" || (opts.LimitBytes > 0 && len(out) >= opts.LimitBytes) {
		return
	}
	k.follow(w, r, run, opts, len(out))
}

// follow streams the run's new lines until it ends or the client goes.
func (k *kubelet) follow(w http.ResponseWriter, r *http.Request, run *logRun, opts proc.LogOptions, written int) {
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	cursor := run.log.Last()
	tick := time.NewTicker(logFollowPoll)
	defer tick.Stop()
	for {
		ended := false
		select {
		case <-r.Context().Done():
			return
		case <-run.done:
			ended = true
		case <-tick.C:
		}
		var lines []proc.Line
		lines, cursor = run.log.After(cursor)
		for _, ln := range lines {
			text := ln.Text + "\n"
			if opts.Timestamps {
				text = ln.At.UTC().Format(time.RFC3339Nano) + " " + text
			}
			if opts.LimitBytes > 0 && written+len(text) > opts.LimitBytes {
				_, _ = w.Write([]byte(text[:opts.LimitBytes-written]))
				return
			}
			written += len(text)
			_, _ = w.Write([]byte(text))
		}
		if flusher != nil && len(lines) > 0 {
			flusher.Flush()
		}
		if ended {
			return
		}
	}
}

// parseLogOptions reads the kubelet's query parameters (PodLogOptions).
func parseLogOptions(r *http.Request) (proc.LogOptions, error) {
	q := r.URL.Query()
	o := proc.LogOptions{TailLines: -1, Timestamps: q.Get("timestamps") == "true"}
	if v := q.Get("tailLines"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return o, fmt.Errorf("tailLines: invalid value %q", v)
		}
		o.TailLines = n
	}
	if v := q.Get("limitBytes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return o, fmt.Errorf("limitBytes: invalid value %q", v)
		}
		o.LimitBytes = n
	}
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return o, fmt.Errorf("sinceSeconds: invalid value %q", v)
		}
		o.Since = time.Now().Add(-time.Duration(n) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return o, fmt.Errorf("sinceTime: %w", err)
		}
		o.Since = t
	}
	return o, nil
}

// containerLogID is the kubelet's validateContainerLogStatus: which run's log a request
// reads, from the status the kubelet reported, with its errors word for word.
func containerLogID(pod *v1.Pod, container string, previous bool) (string, error) {
	cs := findStatus(pod, container, false)
	if cs == nil {
		cs = findStatus(pod, container, true)
	}
	if cs == nil {
		return "", fmt.Errorf("container %q in pod %q is not available", container, pod.Name)
	}
	last := cs.LastTerminationState.Terminated
	waiting, running, terminated := cs.State.Waiting, cs.State.Running, cs.State.Terminated
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", container, pod.Name)
		}
		return last.ContainerID, nil
	case running != nil:
		return cs.ContainerID, nil
	case terminated != nil:
		if terminated.ContainerID != "" {
			return terminated.ContainerID, nil
		}
		if last != nil && last.ContainerID != "" {
			return last.ContainerID, nil
		}
		return "", fmt.Errorf("container %q in pod %q is terminated", container, pod.Name)
	case last != nil:
		if last.ContainerID == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", container, pod.Name)
		}
		return last.ContainerID, nil
	case waiting != nil:
		switch waiting.Reason {
		case "ErrImagePull":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: image can't be pulled", container, pod.Name)
		case "ImagePullBackOff":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: trying and failing to pull image", container, pod.Name)
		}
		return "", fmt.Errorf("container %q in pod %q is waiting to start: %v", container, pod.Name, waiting.Reason)
	}
	return "", fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", container, pod.Name)
}
