package testenv

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// Storm is what a conflict storm's writers did: their writes and conflicts, each writer's last
// written number (0: none), and the spec.replicas writer 0 last wrote (-1: none).
type Storm struct {
	Writes, Conflicts int
	Last              []int
	LastReplicas      int64
}

// ConflictStorm is a user script: writers race read-modify-write updates of the object name
// until deadline (or ctx ends), each setting its label writer-N to its write's number, writer 0
// also flipping spec.replicas between 1 and 2. Lost checks that none of their updates was lost.
func ConflictStorm(ctx context.Context, cl dynamic.ResourceInterface, name string, writers int, deadline time.Time) Storm {
	s := Storm{Last: make([]int, writers), LastReplicas: -1}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				u, err := cl.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					continue
				}
				labels := u.GetLabels()
				if labels == nil {
					labels = map[string]string{}
				}
				labels[fmt.Sprintf("writer-%d", w)] = strconv.Itoa(i)
				u.SetLabels(labels)
				replicas := int64(1 + i%2)
				if w == 0 {
					_ = unstructured.SetNestedField(u.Object, replicas, "spec", "replicas")
				}
				_, err = cl.Update(ctx, u, metav1.UpdateOptions{})
				mu.Lock()
				switch {
				case err == nil:
					s.Writes++
					s.Last[w] = i
					if w == 0 {
						s.LastReplicas = replicas
					}
				case apierrors.IsConflict(err):
					s.Conflicts++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return s
}

// Lost says which of the storm's last updates the stored object u does not carry; nil: none.
func (s Storm) Lost(u *unstructured.Unstructured) error {
	for w, n := range s.Last {
		if n == 0 {
			continue
		}
		if got := u.GetLabels()[fmt.Sprintf("writer-%d", w)]; got != strconv.Itoa(n) {
			return fmt.Errorf("writer %d's last update (%d) lost: label is %q", w, n, got)
		}
	}
	if r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); s.LastReplicas >= 0 && r != s.LastReplicas {
		return fmt.Errorf("spec.replicas %d, last written %d", r, s.LastReplicas)
	}
	return nil
}
