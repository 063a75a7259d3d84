package activator

// The endpoints feed: a watch of the model pods becomes each model's ready endpoints in the
// Holder, so a held request is released the moment a pod of its model turns ready.

import (
	"fmt"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/example/inferenceservice-operator/informers/kinds"
)

// ModelPort is the port a model pod serves on (vLLM's default, as the operator sets it).
const ModelPort = 8000

// PodSelector selects the pods the operator manages: the model pods among them carry
// kinds.InstanceLabel.
var PodSelector = kinds.ManagedByLabel + "=" + kinds.ManagedByValue

// EndpointSetter receives a model's ready endpoints; the Holder is one.
type EndpointSetter interface {
	SetEndpoints(Key, []string)
}

// ModelOf is the model a pod serves, false for a pod of no model.
func ModelOf(pod *corev1.Pod) (Key, bool) {
	name := pod.Labels[kinds.InstanceLabel]
	return Key{Namespace: pod.Namespace, Name: name}, name != ""
}

// ReadyEndpoints returns host:port of each pod that can take a request now, sorted so that an
// unchanged set gives an unchanged list: ready, with an IP, not terminating, and a leader (a
// LeaderWorkerSet's workers serve only through their leader).
func ReadyEndpoints(pods []*corev1.Pod, port int) []string {
	var eps []string
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		if w, ok := p.Labels[kinds.LWSWorkerLabel]; ok && w != "0" {
			continue
		}
		if !podReady(p) {
			continue
		}
		eps = append(eps, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port)))
	}
	slices.Sort(eps)
	return eps
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// StripPod keeps of a pod only what ReadyEndpoints and ModelOf read: a model pod's spec and
// most of its status are kilobytes, and the activator watches every model pod.
func StripPod(obj interface{}) (interface{}, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone: its object was stripped on the way in
	}
	labels := map[string]string{}
	for _, k := range []string{kinds.InstanceLabel, kinds.LWSWorkerLabel} {
		if v, ok := p.Labels[k]; ok {
			labels[k] = v
		}
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		Labels: labels, DeletionTimestamp: p.DeletionTimestamp,
	}}
	out.Status.PodIP = p.Status.PodIP
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out, nil
}

// modelIndex indexes the pods by their model, so one pod's change recomputes only its model.
const modelIndex = "activator-model"

func indexByModel(obj interface{}) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if k, ok := ModelOf(p); ok {
		return []string{k.String()}, nil
	}
	return nil, nil
}

// Feed keeps an EndpointSetter up to date from pod informers (one per watched namespace, or one
// for all); main creates and starts them, Feed only adds its index and handler.
type Feed struct {
	set  EndpointSetter
	port int
}

// NewFeed returns a Feed that sets endpoints on port of each model pod into set.
func NewFeed(set EndpointSetter, port int) *Feed {
	return &Feed{set: set, port: port}
}

// Watch adds the model index and the event handler to pods, before it is started; the
// returned HasSynced is true once its initial list was handed to set.
func (f *Feed) Watch(pods cache.SharedIndexInformer) (cache.InformerSynced, error) {
	if err := pods.AddIndexers(cache.Indexers{modelIndex: indexByModel}); err != nil {
		return nil, fmt.Errorf("pod index: %w", err)
	}
	sync := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if k, ok := ModelOf(p); ok {
			f.resync(pods.GetIndexer(), k)
		}
	}
	reg, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: sync,
		UpdateFunc: func(old, cur interface{}) {
			// A pod relabelled to another model leaves its old one.
			if o, c := old.(*corev1.Pod), cur.(*corev1.Pod); o.Labels[kinds.InstanceLabel] != c.Labels[kinds.InstanceLabel] {
				sync(old)
			}
			sync(cur)
		},
		DeleteFunc: sync,
	})
	if err != nil {
		return nil, fmt.Errorf("pod handler: %w", err)
	}
	return reg.HasSynced, nil
}

// resync sets k's endpoints from the cache, which already holds the event's change.
func (f *Feed) resync(idx cache.Indexer, k Key) {
	objs, err := idx.ByIndex(modelIndex, k.String())
	if err != nil {
		return // the index exists: Watch added it
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	f.set.SetEndpoints(k, ReadyEndpoints(pods, f.port))
}
