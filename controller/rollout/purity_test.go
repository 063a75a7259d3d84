package rollout

import (
	"testing"

	"github.com/example/inferenceservice-operator/controller/purity"
)

// TestPure keeps the rollout a decision: no client, no context, no clock, not even through a
// dependency, so every step's verdict is a table test away.
func TestPure(t *testing.T) { purity.Check(t, nil) }
