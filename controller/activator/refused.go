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
)

// Refused is Hold's answer past a bound; the Handler turns it into 503 with Retry-After.
type Refused struct {
	Key        Key
	Reason     Reason
	RetryAfter time.Duration
	// MaxHeld or MaxWait is the bound that was reached, for the message.
	MaxHeld int
	MaxWait time.Duration
}

func (e *Refused) Error() string {
	switch e.Reason {
	case ReasonQueueFull:
		return fmt.Sprintf("model %s is starting and already holds %d requests; retry after %s", e.Key, e.MaxHeld, e.RetryAfter)
	case ReasonWaitTimeout:
		return fmt.Sprintf("model %s did not become ready within %s; retry after %s", e.Key, e.MaxWait, e.RetryAfter)
	}
	return fmt.Sprintf("model %s refused the request (%s); retry after %s", e.Key, e.Reason, e.RetryAfter)
}
