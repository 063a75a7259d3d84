// Behaviors: the failure mode each container plays, from its image or annotations (see README.md).

package main

import (
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

const (
	fakeRegistry       = proc.FakeRegistry
	behaviorAnnotation = "kubelet.fake/behavior"
)

type behaviorKind string

const (
	bReady       behaviorKind = "ready"
	bNeverReady  behaviorKind = "never-ready"
	bSlowReady   behaviorKind = "slow-ready"
	bCrashLoop   behaviorKind = "crashloop"
	bOOMKilled   behaviorKind = "oomkilled"
	bErrImgPull  behaviorKind = "errimagepull"
	bEvicted     behaviorKind = "evicted"
	bUnspecified behaviorKind = ""
)

type behavior struct {
	kind  behaviorKind
	delay time.Duration // slow-ready
}

// parseBehavior parses "never-ready", "slow-ready-5", "crashloop", ...
func parseBehavior(s string) (behavior, bool) {
	s = strings.TrimSpace(strings.ToLower(s))
	switch behaviorKind(s) {
	case bReady, "running", "":
		return behavior{kind: bReady}, s != ""
	case bNeverReady, bCrashLoop, bOOMKilled, bErrImgPull, bEvicted:
		return behavior{kind: behaviorKind(s)}, true
	}
	if rest, ok := strings.CutPrefix(s, "slow-ready-"); ok {
		rest = strings.TrimSuffix(rest, "s")
		if n, err := strconv.ParseFloat(rest, 64); err == nil && n >= 0 {
			return behavior{kind: bSlowReady, delay: time.Duration(n * float64(time.Second))}, true
		}
	}
	return behavior{kind: bReady}, false
}

// imageBehavior reads the reserved image name kubelet.fake/<behavior>[:tag][@digest].
func imageBehavior(image string) behavior {
	name, ok := strings.CutPrefix(image, fakeRegistry)
	if !ok {
		return behavior{kind: bReady}
	}
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i >= 0 {
		name = name[:i]
	}
	b, _ := parseBehavior(name)
	return b
}

// containerBehavior: annotation kubelet.fake/behavior.<container> wins over
// kubelet.fake/behavior, which wins over the image name.
func containerBehavior(pod *v1.Pod, c *v1.Container) behavior {
	if v, ok := pod.Annotations[behaviorAnnotation+"."+c.Name]; ok {
		if b, ok := parseBehavior(v); ok {
			return b
		}
	}
	if v, ok := pod.Annotations[behaviorAnnotation]; ok {
		if b, ok := parseBehavior(v); ok {
			return b
		}
	}
	return imageBehavior(c.Image)
}

func sameBehaviors(a, b *v1.Pod) bool {
	pick := func(p *v1.Pod) []string {
		var out []string
		for k, v := range p.Annotations {
			if strings.HasPrefix(k, behaviorAnnotation) {
				out = append(out, k+"="+v)
			}
		}
		sort.Strings(out)
		return out
	}
	return strings.Join(pick(a), ",") == strings.Join(pick(b), ",")
}
