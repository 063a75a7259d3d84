// Serving containers: a container whose image serves a model runs a fake model server: the
// fake SGLang of sglang/ (package sglang) when its command is SGLang's launcher (or an SGLang
// image sets none), else the fake vLLM of vllm/ (package vllm), which also plays the fills and
// any other command of a serving image; its exit, its probes' results and its log reach the
// pod worker and the log endpoint.

package main

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
	"github.com/example/inferenceservice-operator/test/localcluster/sglang"
	"github.com/example/inferenceservice-operator/test/localcluster/vllm"
)

// LWS's pod labels (its pod webhook sets them), which say which group a pod is in.
const (
	lwsNameLabel   = "leaderworkerset.sigs.k8s.io/name"
	lwsGroupLabel  = "leaderworkerset.sigs.k8s.io/group-index"
	lwsWorkerLabel = "leaderworkerset.sigs.k8s.io/worker-index"
)

// serveAnnotation set to "false" on a pod keeps its containers on the schedule model even
// where their image serves, for tests of that model on a serving cluster.
const serveAnnotation = "kubelet.fake/serve"

// logBytes bounds each container run's log, as a runtime rotates it.
const logBytes = 1 << 20

// podMsg is what a container's process and prober tell the pod worker.
type podMsg struct {
	c     *ctr
	run   int
	exit  *proc.Exit
	probe string // probeStartup, probeReadiness, probeLiveness
	ok    bool
}

// logRun is one container run's log, found by container ID as the runtime finds it.
type logRun struct {
	log  *proc.Log
	done chan struct{} // closed when the run ends: `kubectl logs -f` returns
}

// process is what a serving container runs: the fake model server, or an exec image's
// executable (exec.go).
type process interface {
	Exited() <-chan proc.Exit // its exit when it ends on its own; nothing once stopped
	Stop()                    // SIGTERM; returns at once
}

// serves says whether the container runs a process: the fake model server, or an exec image's.
func (ps *podState) serves(c *ctr) bool {
	return ps.k.cfg.serve && !c.init && ps.pod.Annotations[serveAnnotation] != "false" &&
		(vllm.Serves(c.spec.Image) || sglang.Serves(c.spec.Image) || ps.k.cfg.execImages.execPath(c.spec.Image) != "") &&
		c.beh.kind != bErrImgPull
}

// secret and configMap read what an environment names; a missing one is the error the
// kubelet's managers give (`secret "x" not found`).
func (k *kubelet) secret(ctx context.Context, ns, name string) (*v1.Secret, error) {
	s, err := k.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, notFound("secret", name)
	}
	return s, err
}

func (k *kubelet) configMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
	cm, err := k.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, notFound("configmap", name)
	}
	return cm, err
}

// serverSpec is what the container's process sees.
func (ps *podState) serverSpec(c *ctr) (proc.Spec, error) {
	env, err := containerEnv(ps.ctx, ps.k, ps.k.services, ps.pod, &c.spec, ps.ip, ps.host)
	if err != nil {
		return proc.Spec{}, err
	}
	var mem int64
	if q, ok := c.spec.Resources.Limits[v1.ResourceMemory]; ok {
		mem = q.Value()
	}
	var fault proc.GPUFault
	if gpuCount(&c.spec) > 0 { // a container without GPUs holds no sick device
		fault = ps.k.gpuFault(ps.pod.Spec.NodeName)
	}
	spec := proc.Spec{
		Image:       c.spec.Image,
		Command:     expandCommand(c.spec.Command, env),
		Args:        expandCommand(c.spec.Args, env),
		Env:         env,
		GPUs:        gpuCount(&c.spec),
		MemoryLimit: mem,
		ShmSize:     shmSize(ps.pod, &c.spec),
		Mounts:      mountIdentities(ps.pod, &c.spec),
		Behavior:    proc.Behavior{Kind: proc.BehaviorKind(c.beh.kind), Delay: c.beh.delay},
		IP:          ps.ip,
		GPUFault:    fault,
		Ray: proc.LWSMember{Namespace: ps.pod.Namespace, Pod: ps.pod.Name, Name: ps.pod.Labels[lwsNameLabel],
			Group: ps.pod.Labels[lwsGroupLabel], Worker: ps.pod.Labels[lwsWorkerLabel]},
		DNS:      podDNS(ps.pod, ps.k.cfg.dnsServer),
		ReadOnly: readOnlyMounts(ps.pod, &c.spec),
	}
	spec.DownloadMBPerS, spec.VolumeBytes = ps.volumeLink(ps.ctx, &c.spec, env)
	if x, ok := ps.k.cfg.execImages.match(c.spec.Image); ok {
		if err := ps.execSpec(&spec, x.binary(spec.Command), c); err != nil {
			return proc.Spec{}, err
		}
	}
	return spec, nil
}

// newRun opens the log of a container run under its container ID; the kubelet keeps the
// current and the previous run of each container, as `kubectl logs [--previous]` reads them.
func (c *ctr) newRun(ps *podState) *proc.Log {
	run := &logRun{log: proc.NewLog(logBytes), done: make(chan struct{})}
	ps.k.logsMu.Lock()
	ps.k.logs[c.containerID] = run
	ps.k.podLogs[ps.pod.UID] = append(ps.k.podLogs[ps.pod.UID], c.containerID)
	c.logIDs = append(c.logIDs, c.containerID)
	if len(c.logIDs) > 2 {
		delete(ps.k.logs, c.logIDs[0])
		c.logIDs = c.logIDs[1:]
	}
	ps.k.logsMu.Unlock()
	c.runLog = run
	return run.log
}

// endRun marks the current run's log complete.
func (c *ctr) endRun() {
	if c.runLog != nil {
		close(c.runLog.done)
		c.runLog = nil
	}
}

// dropLogs forgets a deleted pod's logs.
func (k *kubelet) dropLogs(uid types.UID) {
	k.logsMu.Lock()
	defer k.logsMu.Unlock()
	for _, id := range k.podLogs[uid] {
		delete(k.logs, id)
	}
	delete(k.podLogs, uid)
}

func (k *kubelet) logRun(containerID string) *logRun {
	k.logsMu.Lock()
	defer k.logsMu.Unlock()
	return k.logs[containerID]
}

// startServing starts the run's process and its prober. A restored run (a restart of the
// fake kubelet) starts from the started and ready its status reported.
func (c *ctr) startServing(ps *podState, spec proc.Spec, now time.Time, restored *v1.ContainerStatus) {
	c.run++
	run := c.run
	switch {
	case spec.Exec != "":
		c.srv = ps.k.startExec(ps.pod, spec, c.newRun(ps))
	case sglang.Launches(spec):
		c.srv = sglang.Start(spec, sglangConfig(ps.k.cfg.server), c.newRun(ps))
	default:
		c.srv = vllm.Start(spec, ps.k.cfg.server, c.newRun(ps))
	}
	c.stopCh = make(chan struct{})
	c.next, c.nextProbe = time.Time{}, time.Time{}
	c.startedOK, c.readyAt = time.Time{}, time.Time{}
	started := c.spec.StartupProbe == nil || (restored != nil && restored.Started != nil && *restored.Started)
	ready := restored != nil && restored.Ready
	if started {
		c.startedOK = now
		if c.spec.ReadinessProbe == nil || ready {
			c.readyAt = now // no readiness probe: ready once started, as a kubelet reports
		}
	}
	stop := c.stopCh
	send := func(m podMsg) bool {
		m.c, m.run = c, run
		select {
		case ps.msgs <- m:
			return true
		case <-stop:
			return false
		}
	}
	srv := c.srv
	go func() {
		select {
		case st := <-srv.Exited():
			send(podMsg{exit: &st})
		case <-stop:
		}
	}()
	if c.spec.StartupProbe == nil && c.spec.ReadinessProbe == nil && c.spec.LivenessProbe == nil {
		return
	}
	cp := &containerProber{
		probers:   ps.k.probers,
		rec:       ps.rec,
		ref:       containerRef(ps.pod, c.spec.Name, c.init),
		spec:      c.spec,
		ip:        ps.ip,
		grpc:      spec.Exec != "", // a real process may serve grpc.health.v1; the fake server does not
		startedAt: c.startedAt,
		started:   started,
		ready:     ready,
		report:    func(kind string, ok bool) bool { return send(podMsg{probe: kind, ok: ok}) },
		stop:      stop,
	}
	go cp.run()
}

// sglangConfig is the fake SGLang's share of the kubelet's model-server configuration: the
// same time scale, bandwidths, GPUs and volumes as the fake vLLM's; --max-num-seqs's default
// slots are SGLang's default running requests.
func sglangConfig(c vllm.Config) sglang.Config {
	sc := sglang.Config{LoadTime: c.LoadTime, TokenTime: c.TokenTime, PrefillTime: c.PrefillTime,
		PrefillBase: c.PrefillBase, PrefillMax: c.PrefillMax, DownloadTime: c.DownloadTime, TimeScale: c.TimeScale,
		DownloadBandwidth: c.DownloadBandwidth, LoadBandwidth: c.LoadBandwidth, AdapterLoadTime: c.AdapterLoadTime,
		CrashRun: c.CrashRun, GPUMemory: c.GPUMemory, MaxRunning: c.MaxNumSeqs, Weights: c.Weights}
	if c.Ingress != nil {
		sc.Ingress = c.Ingress
	}
	return sc
}

// stopServing is the SIGTERM: the process and its prober stop, its log is complete.
func (c *ctr) stopServing() {
	if c.srv == nil {
		return
	}
	close(c.stopCh)
	c.srv.Stop()
	c.srv = nil
	c.endRun()
}

// handle applies what a process or prober reported, if it is about the current run.
func (ps *podState) handle(m podMsg, now time.Time) {
	c := m.c
	if c.run != m.run || c.state != csRunning || c.srv == nil {
		return
	}
	switch {
	case m.exit != nil:
		c.stopServing()
		c.crashWith(ps, now, m.exit.Code, m.exit.Reason)
	case m.probe == probeStartup && m.ok:
		c.startedOK = now
		if c.spec.ReadinessProbe == nil {
			c.readyAt = now
		}
	case m.probe == probeReadiness && m.ok:
		c.readyAt = now
	case m.probe == probeReadiness:
		c.readyAt = time.Time{}
	case m.probe == probeStartup, m.probe == probeLiveness:
		c.killForProbe(ps, now, m.probe)
	}
}

// killForProbe is the kubelet killing a container whose liveness or startup probe failed past
// its threshold: a Killing event, SIGTERM, and a restart through the usual back-off.
func (c *ctr) killForProbe(ps *podState, now time.Time, kind string) {
	msg := "Container " + c.spec.Name + " failed " + map[string]string{probeStartup: "startup", probeLiveness: "liveness"}[kind] + " probe"
	if ps.pod.Spec.RestartPolicy != v1.RestartPolicyNever {
		msg += ", will be restarted"
	}
	ps.rec.Event(containerRef(ps.pod, c.spec.Name, c.init), v1.EventTypeNormal, "Killing", msg)
	c.stopServing()
	// The server shuts down on SIGTERM; a runtime reports the signal's 128+15.
	c.crashWith(ps, now, 143, "Error")
}

// stopAll stops every process of the pod (deletion, the worker ending).
func (ps *podState) stopAll() {
	for _, c := range ps.ctrs {
		c.stopServing()
		c.endRun()
	}
}
