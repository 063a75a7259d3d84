// What the controller remembers of the adapter step between syncs, as views of its one
// per-key memory (memory.go): the calls made and their back-off (attempts), and what each SGLang
// pod's answers said it has loaded (servedSets).

package controller

import (
	"maps"
	"slices"
	"time"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/queue"
)

// attempts remembers, per isvc, pod and step, the last call made and how many were made
// since the step was last seen done: the back-off of a step that does not take, and the
// server's message of a failed load, reported through PodAdapters.Failed. An entry goes when
// an observation shows the step done, or its pod no longer serves, or the isvc goes. A view of
// the controller's memory.
type attempts memory

type attemptKey struct {
	pod, name string
	load      bool
}

type attempt struct {
	at    time.Time
	count int
	msg   string // the server's error; "" when the call succeeded
}

func (a *attempts) has(k queue.Key) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := (*memory)(a).lookup(k)
	return r != nil && len(r.attempts) > 0
}

// due returns how long until s may be tried again on its pod; 0: now.
func (a *attempts) due(k queue.Key, s reconcile.AdapterStep, now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := (*memory)(a).lookup(k)
	if r == nil {
		return 0
	}
	e, ok := r.attempts[attemptKey{s.Pod, s.Name, s.Load}]
	if !ok {
		return 0
	}
	delay := attemptMax
	if e.count < 10 {
		delay = min(attemptMax, attemptBase<<(e.count-1))
	}
	return max(0, e.at.Add(delay).Sub(now))
}

func (a *attempts) record(k queue.Key, s reconcile.AdapterStep, now time.Time, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ak := attemptKey{s.Pod, s.Name, s.Load}
	r := (*memory)(a).entry(k)
	if r.attempts == nil {
		r.attempts = map[attemptKey]attempt{}
	}
	e, had := r.attempts[ak]
	if !had {
		for other, o := range a.keys {
			if a.attemptsHeld < maxAttempts {
				break
			}
			if other != k && len(o.attempts) > 0 { // full: another model's back-off is forgotten, never this one's
				a.attemptsHeld -= len(o.attempts)
				o.attempts = nil
				(*memory)(a).tidy(other)
			}
		}
		a.attemptsHeld++
	}
	e.at, e.count, e.msg = now, e.count+1, ""
	if err != nil {
		e.msg = err.Error()
	}
	r.attempts[ak] = e
}

// settle forgets the attempts an observation shows done, and those of pods that no longer
// serve; a pod that could not be asked keeps its own.
func (a *attempts) settle(k queue.Key, pods []reconcile.PodAdapters) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := (*memory)(a).lookup(k)
	if r == nil || len(r.attempts) == 0 {
		return
	}
	byPod := make(map[string]*reconcile.PodAdapters, len(pods))
	for i := range pods {
		byPod[pods[i].Pod] = &pods[i]
	}
	for ak := range r.attempts {
		p, serving := byPod[ak.pod]
		if serving && p.Err != "" {
			continue
		}
		if !serving || ak.load == slices.ContainsFunc(p.Loaded, func(l reconcile.LoadedAdapter) bool { return l.Name == ak.name }) {
			delete(r.attempts, ak)
			a.attemptsHeld--
		}
	}
	(*memory)(a).tidy(k)
}

// failed are the server's messages of the loads that failed last on pod.
func (a *attempts) failed(k queue.Key, pod string) map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := (*memory)(a).lookup(k)
	if r == nil {
		return nil
	}
	var out map[string]string
	for ak, e := range r.attempts {
		if ak.pod == pod && ak.load && e.msg != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[ak.name] = e.msg
		}
	}
	return out
}

// servedSets remembers, per isvc and pod, what the adapter answers of the pod's server container
// listed, for the start of the container they came from (podInstance): what is observed of a
// server whose /v1/models lists no adapter (answeredAdapters). An entry goes when its pod no
// longer serves, or the isvc has nothing of adapters to observe, or goes. A view of the
// controller's memory.
type servedSets memory

// podServed is one pod's: known is false until an answer of this container's listed its set.
type podServed struct {
	instance string
	known    bool
	loaded   map[string]string // name -> path
}

// observe records the serving pods of k and their container starts (pod -> podInstance),
// forgets the others, and returns what is known of each: a container started again since the
// last answer has loaded nothing; a pod without an answer is not in the result.
func (v *servedSets) observe(k queue.Key, instances map[string]string) map[string]map[string]string {
	v.mu.Lock()
	defer v.mu.Unlock()
	r := (*memory)(v).lookup(k)
	if r == nil && len(instances) == 0 {
		return nil
	}
	if r == nil {
		r = (*memory)(v).entry(k)
	}
	for pod := range r.served {
		if _, serving := instances[pod]; !serving {
			delete(r.served, pod)
		}
	}
	out := map[string]map[string]string{}
	for pod, inst := range instances {
		if r.served == nil {
			r.served = map[string]podServed{}
		}
		e, had := r.served[pod]
		switch {
		case !had:
			e = podServed{instance: inst}
		case e.instance != inst:
			e = podServed{instance: inst, known: true, loaded: map[string]string{}}
		}
		r.served[pod] = e
		if e.known {
			out[pod] = maps.Clone(e.loaded)
		}
	}
	(*memory)(v).tidy(k)
	return out
}

// answer records the server's answer to step s on its pod: the list it carries is what is
// loaded; an answer without one (SGLang's refusal to unload a name it does not have) tells of
// s's adapter alone.
func (v *servedSets) answer(k queue.Key, s reconcile.AdapterStep, loaded map[string]string, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	r := (*memory)(v).lookup(k)
	if r == nil {
		return
	}
	e, ok := r.served[s.Pod]
	if !ok {
		return
	}
	switch {
	case loaded != nil:
		e.known, e.loaded = true, maps.Clone(loaded)
	case err == nil && e.known && !s.Load:
		delete(e.loaded, s.Name)
	}
	r.served[s.Pod] = e
}
