// Package clients builds the operator's API clients: where its requests wait for their turn
// (one client-side budget, children's writes before Events) and, with leader election, pass
// the write fence.
package clients

import (
	"net/http"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Priority classes of the Budget; lower values are served first.
const (
	High = iota // the controller's reads and its children's writes
	Low         // Events: they only report
	classes
)

// Set holds the clients. The plain ones serve what must work on every replica, leader or not
// (the Lease, the webhook's CA, metrics auth, discovery); the controller's go through the
// fence when one is given.
type Set struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Controller clients: caches, reconciles, Events.
	ControllerKube    kubernetes.Interface
	ControllerEvents  kubernetes.Interface
	ControllerDynamic dynamic.Interface
	// Budget is shared by the typed clients; its Contended tells the controller to shed
	// Normal Events. The dynamic clients (isvc status, finalizers) keep their own budget, as
	// client-go gives each client one.
	Budget *Budget
}

// New builds the clients from cfg (its QPS and Burst set the budget). fence, when not nil,
// wraps the controller's clients' transport.
func New(cfg *rest.Config, fence func(http.RoundTripper) http.RoundTripper) (*Set, error) {
	s := &Set{Budget: NewBudget(cfg.QPS, cfg.Burst)}
	kcfg := rest.CopyConfig(cfg)
	kcfg.RateLimiter = s.Budget.Class(High)
	ecfg := rest.CopyConfig(kcfg)
	ecfg.RateLimiter = s.Budget.Class(Low)
	fenced := func(c *rest.Config) *rest.Config {
		f := rest.CopyConfig(c) // the same rate limiter: one budget, fenced or not
		f.Wrap(fence)
		return f
	}
	var err error
	if s.Kube, err = kubernetes.NewForConfig(kcfg); err != nil {
		return nil, err
	}
	if s.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if fence == nil {
		s.ControllerKube, s.ControllerDynamic = s.Kube, s.Dynamic
		s.ControllerEvents, err = kubernetes.NewForConfig(ecfg)
		return s, err
	}
	if s.ControllerKube, err = kubernetes.NewForConfig(fenced(kcfg)); err != nil {
		return nil, err
	}
	if s.ControllerEvents, err = kubernetes.NewForConfig(fenced(ecfg)); err != nil {
		return nil, err
	}
	if s.ControllerDynamic, err = dynamic.NewForConfig(fenced(cfg)); err != nil {
		return nil, err
	}
	return s, nil
}

// Stop ends the budget's dispatcher.
func (s *Set) Stop() { s.Budget.Stop() }
