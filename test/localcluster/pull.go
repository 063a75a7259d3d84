// Slow image pulls: the node annotation kubelet.fake/pull-seconds, the images each node holds,
// and a container waiting ContainerCreating while its image comes down.

package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// pullSecondsAnnotation on a node makes every image it has not pulled yet take that many
// seconds to pull; without it a pull is instant.
const pullSecondsAnnotation = "kubelet.fake/pull-seconds"

// pulledImageSize is the size the Pulled event reports, as containerd reports one.
const pulledImageSize = 4212134

// nodeImages is what each node's runtime holds: the pull time of its node and, per image, when
// it is (or will be, a pull in progress) on the machine.
type nodeImages struct {
	mu     sync.Mutex
	pull   map[string]time.Duration
	images map[string]map[string]time.Time
}

func newNodeImages() *nodeImages {
	return &nodeImages{pull: map[string]time.Duration{}, images: map[string]map[string]time.Time{}}
}

// nodePullTime reads the annotation; an unparsable or negative value is an instant pull, as a
// typo must not stall every pod of the node.
func nodePullTime(node *v1.Node) time.Duration {
	v, ok := node.Annotations[pullSecondsAnnotation]
	if !ok {
		return 0
	}
	n, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), "s"), 64)
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n * float64(time.Second))
}

func (ni *nodeImages) setPullTime(node string, d time.Duration) bool {
	ni.mu.Lock()
	defer ni.mu.Unlock()
	changed := ni.pull[node] != d
	ni.pull[node] = d
	return changed
}

// presentAt is when image is on node: at or before now, present; later, a pull in progress
// (this container's or one another pod started, which it waits for as the runtime does).
func (ni *nodeImages) presentAt(node, image string, now time.Time) time.Time {
	ni.mu.Lock()
	defer ni.mu.Unlock()
	imgs := ni.images[node]
	if imgs == nil {
		imgs = map[string]time.Time{}
		ni.images[node] = imgs
	}
	if at, ok := imgs[image]; ok {
		return at
	}
	at := now.Add(ni.pull[node])
	imgs[image] = at
	return at
}

// followPullTime applies the node's kubelet.fake/pull-seconds (watchNodes calls it on every
// add and update of a fake node).
func (k *kubelet) followPullTime(_ context.Context, node *v1.Node) {
	if d := nodePullTime(node); k.images.setPullTime(node.Name, d) {
		klog.InfoS("fake kubelet: node image pull time", "node", node.Name, "pull", d)
	}
}

// awaitPull starts the pull of an image the node does not hold yet, when its node pulls
// slowly: the Pulling event, the container waiting ContainerCreating until the image is
// there. false: the image is present, the container goes on starting.
func (c *ctr) awaitPull(ps *podState, now time.Time) bool {
	img := normalizedImage(c.spec.Image)
	at := ps.k.images.presentAt(ps.pod.Spec.NodeName, img, now)
	if !at.After(now) {
		return false
	}
	ps.rec.Eventf(containerRef(ps.pod, c.spec.Name, c.init), v1.EventTypeNormal, "Pulling", "Pulling image %q", img)
	c.state = csPulling
	c.pullStart = now
	c.next = at
	c.readyAt, c.startedOK, c.nextProbe = time.Time{}, time.Time{}, time.Time{}
	return true
}

// pulled ends a slow pull: the start that waited for it goes on, its Pulled event saying how
// long the pull took.
func (c *ctr) pulled(ps *podState, at time.Time) {
	c.pulledIn = at.Sub(c.pullStart).Truncate(time.Millisecond)
	c.start(ps, at, false)
	ps.scheduleEviction() // an evicted behavior runs its moment from this start
}
