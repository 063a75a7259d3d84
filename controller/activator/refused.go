package activator

import (
	"fmt"
	"time"
)

// Reason says why a request was refused; the values of activator_refused_total's reason label.
type Reason string

const (
	// ReasonQueueFull: the model already held MaxHeld requests when this one came.
	ReasonQueueFull Reason = "queue_full"
	// ReasonWaitTimeout: the model had no ready endpoint within MaxWait.
	ReasonWaitTimeout Reason = "wait_timeout"
	// ReasonHeldTotal: the activator already held MaxHeldTotal requests, of all models.
	ReasonHeldTotal Reason = "held_total"
	// ReasonHeldNamespace: the model's namespace already had MaxHeldPerNamespace held.
	ReasonHeldNamespace Reason = "held_namespace"
	// ReasonBufferTotal: the request bodies read ahead, of all models, were at their bound.
	ReasonBufferTotal Reason = "buffer_total"
	// ReasonBufferNamespace: the bodies read ahead for the model's namespace were at theirs.
	ReasonBufferNamespace Reason = "buffer_namespace"
)

// Reasons are every Reason, exported from the start so a rate() sees the first refusal.
var Reasons = []Reason{ReasonQueueFull, ReasonWaitTimeout, ReasonHeldTotal, ReasonHeldNamespace, ReasonBufferTotal, ReasonBufferNamespace}

// Refused is a request's answer past a bound; the Handler turns it into 503 with Retry-After.
type Refused struct {
	Key        Key
	Reason     Reason
	RetryAfter time.Duration
	// MaxHeld or MaxWait is the bound that was reached, for the message.
	MaxHeld int
	MaxWait time.Duration
	// MaxBytes is the buffer bound that was reached.
	MaxBytes int64
}

func (e *Refused) Error() string {
	switch e.Reason {
	case ReasonQueueFull:
		return fmt.Sprintf("model %s is starting and already holds %d requests; retry after %s", e.Key, e.MaxHeld, e.RetryAfter)
	case ReasonWaitTimeout:
		return fmt.Sprintf("model %s did not become ready within %s; retry after %s", e.Key, e.MaxWait, e.RetryAfter)
	case ReasonHeldTotal:
		return fmt.Sprintf("the activator already holds %d requests for models starting; retry after %s", e.MaxHeld, e.RetryAfter)
	case ReasonHeldNamespace:
		return fmt.Sprintf("namespace %s already has %d requests held for its models starting; retry after %s", e.Key.Namespace, e.MaxHeld, e.RetryAfter)
	case ReasonBufferTotal:
		return fmt.Sprintf("the activator's buffer for request bodies (%d MiB) is full; retry after %s", e.MaxBytes>>20, e.RetryAfter)
	case ReasonBufferNamespace:
		return fmt.Sprintf("namespace %s's share of the activator's buffer for request bodies (%d MiB) is full; retry after %s", e.Key.Namespace, e.MaxBytes>>20, e.RetryAfter)
	}
	return fmt.Sprintf("model %s refused the request (%s); retry after %s", e.Key, e.Reason, e.RetryAfter)
}
