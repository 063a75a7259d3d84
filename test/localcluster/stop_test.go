package main

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStopDelayBoundedByGrace(t *testing.T) {
	grace := func(s int64) *int64 { return &s }
	for _, c := range []struct {
		ann   string
		grace *int64
		want  time.Duration
	}{
		{"", grace(30), 0},
		{"x", grace(30), 0},
		{"5", grace(30), 5 * time.Second},
		{"5", grace(2), 2 * time.Second},
		{"5", nil, 5 * time.Second},
	} {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{stopSecondsAnnotation: c.ann}, DeletionGracePeriodSeconds: c.grace}}
		if got := stopDelay(p); got != c.want {
			t.Errorf("%q grace %v: %s, want %s", c.ann, c.grace, got, c.want)
		}
	}
}
