// Package impure is every violation purity finds, once.
package impure

import (
	"context"
	"time"
)

// Late reads the clock and takes a context.
func Late(ctx context.Context, at time.Time) bool { return time.Now().After(at) && ctx.Err() == nil }
