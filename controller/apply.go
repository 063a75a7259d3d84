// Applying a reconcile's actions: creates, patches of owned fields, deletes with preconditions,
// and the one conflict-retry path (update), which re-reads and re-merges.

package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
)

type conflictError struct{ msg string }

func (e *conflictError) Error() string { return e.msg }

// applyAll applies the actions concurrently (children are independent, and a new isvc's
// creates then cost one round trip, two when the Deployment is created: what acts on it waits
// for its create), records one Normal Event for what was written and one Warning Event per
// failure. Children found to be someone else's are returned as conflicts, not errors: the
// status reports them.
func (c *Controller) applyAll(ctx context.Context, isvc *crd.InferenceService, actions []reconcile.Action) (conflicts []string, err error) {
	done := make([]reconcile.Verb, len(actions))
	results := make([]error, len(actions))
	run := func(after bool) {
		var wg sync.WaitGroup
		for i := range actions {
			if actions[i].AfterDeployment != after {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				done[i], results[i] = c.apply(ctx, actions[i])
			}()
		}
		wg.Wait()
	}
	run(false)
	if deploymentApplied(actions, results) {
		run(true)
	}
	var errs []error
	var written []string
	var first *reconcile.Action
	reason := ""
	for i, a := range actions {
		var conflict *conflictError
		if errors.As(results[i], &conflict) {
			// Reported by the status (ChildConflict) and its one Warning Event, not per retry.
			conflicts = append(conflicts, conflict.Error())
			continue
		}
		if err := results[i]; err != nil {
			c.metrics.APIError(string(apierrors.ReasonForError(err)))
			// Not in a namespace being deleted: the model goes with it, and the recorder's
			// retries would write the Warning into a namespace made again under that name.
			if !namespaceTerminating(err) {
				c.recorder.Eventf(isvc, a.Object, corev1.EventTypeWarning, EventFailed, actionName(a.Verb),
					"%s %s %s failed: %v", a.Verb, a.Kind, a.Object.GetName(), err)
			}
			errs = append(errs, fmt.Errorf("%s %s %s/%s: %w", a.Verb, a.Kind, a.Object.GetNamespace(), a.Object.GetName(), err))
			continue
		}
		if done[i] == "" {
			continue // nothing was written (the cache was behind, or the action waited), so nothing to tell
		}
		r := map[reconcile.Verb]string{reconcile.Create: EventCreated, reconcile.Update: EventUpdated, reconcile.Delete: EventDeleted}[done[i]]
		if first == nil {
			first, reason = &actions[i], r
		} else if r != reason {
			reason = EventReconciled
		}
		written = append(written, r+" "+a.Kind+" "+a.Object.GetName())
	}
	if first != nil {
		// The first child is the related object: events.k8s.io folds events with the same
		// (regarding, related, reason, action) into one series, which would hide a later one.
		c.recorder.Eventf(isvc, first.Object, corev1.EventTypeNormal, reason, actionName(first.Verb), "%s", strings.Join(written, "; "))
	}
	return conflicts, errors.Join(errs...)
}

// deploymentApplied reports whether the actions that wait for the Deployment (or the
// LeaderWorkerSet in its place) may go: its create, if any, succeeded (a create that found our
// own succeeded too).
func deploymentApplied(actions []reconcile.Action, results []error) bool {
	for i, a := range actions {
		if reconcile.IsAnchorKind(a.Kind) && a.Verb == reconcile.Create && results[i] != nil {
			return false
		}
	}
	return true
}

func actionName(v reconcile.Verb) string {
	switch v {
	case reconcile.Create:
		return "Create"
	case reconcile.Update:
		return "Update"
	default:
		return "Delete"
	}
}

// apply performs one action and returns what it wrote ("" for nothing). Updates carry the
// resourceVersion read from the cache; on a conflict the live object is re-read from the API
// server and the owned fields re-applied.
func (c *Controller) apply(ctx context.Context, a reconcile.Action) (reconcile.Verb, error) {
	switch a.Verb {
	case reconcile.Create:
		if c.memory.namesakes().seen(a) {
			// A create found someone else's namesake before: read it rather than fail
			// another create on every retry and resync; create once it is gone.
			if verb, err := c.update(ctx, a, true); !apierrors.IsNotFound(err) {
				return verb, err
			}
			c.memory.namesakes().forget(a)
		}
		owner, owned := ownerKey(a.Object)
		if owned {
			c.memory.expected().create(owner, c.now())
		}
		_, err := c.write(ctx, reconcile.Create, a.Object)
		if err != nil && owned {
			c.memory.expected().observed(owner) // nothing will be added
		}
		if !apierrors.IsAlreadyExists(err) {
			return reconcile.Create, err
		}
		if a.Kind == reconcile.KindReferenceGrant {
			return "", nil // a namespace's grant, made for another of its models
		}
		// Not in the label-scoped cache: someone else's namesake, or ours with its labels
		// changed (a relabel drops it from the cache). Ownership is the controller reference:
		// ours gets its owned fields, labels included, back, and so returns to the cache.
		return c.update(ctx, a, true)
	case reconcile.Delete:
		uid, rv := a.Object.GetUID(), a.Object.GetResourceVersion()
		err := c.delete(ctx, a.Object, &metav1.Preconditions{UID: &uid, ResourceVersion: &rv})
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return reconcile.Delete, err
	}
	return c.update(ctx, a, false)
}

// update writes the action's owned fields. From the cache it sends a patch from the cached
// base; after a conflict, or when read says the cache does not hold the object, it reads the
// live object, checks it is ours and re-merges, and writes nothing when nothing differs.
func (c *Controller) update(ctx context.Context, a reconcile.Action, read bool) (reconcile.Verb, error) {
	obj, base := a.Object, a.Cached
	wrote := reconcile.Verb("")
	attempt := 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if attempt++; attempt > 1 {
			c.metrics.ConflictRetry(a.Kind)
			read = true
		}
		if read {
			live, err := c.get(ctx, a.Object)
			if err != nil {
				return err
			}
			if !reconcile.SameController(live, a.Object) {
				if a.Verb == reconcile.Create {
					c.memory.namesakes().add(a)
				}
				return &conflictError{reconcile.ConflictMessage(a.Kind, live)}
			}
			c.memory.namesakes().forget(a)
			var changed bool
			if obj, changed = reconcile.Remerge(live, a); !changed {
				return nil // someone (an earlier reconcile) already wrote it
			}
			base = nil // the object read back is whole
		}
		var err error
		if base != nil {
			err = c.patch(ctx, base, obj)
		} else {
			_, err = c.write(ctx, reconcile.Update, obj)
		}
		if err == nil {
			wrote = reconcile.Update
		}
		return err
	})
	return wrote, err
}

// patch sends the difference between base (a cached, partial copy of the live object) and obj
// (base with the owned fields set) as a strategic merge patch carrying obj's resourceVersion:
// a conflict, like an Update's, when the object changed since it was cached.
func (c *Controller) patch(ctx context.Context, base, obj reconcile.Child) error {
	data, err := reconcile.OwnedPatch(base, obj)
	if err != nil {
		return err
	}
	cl, err := c.clientFor(obj)
	if err != nil {
		return err
	}
	return cl.patch(ctx, obj.GetName(), data)
}

func (c *Controller) write(ctx context.Context, v reconcile.Verb, obj reconcile.Child) (reconcile.Child, error) {
	cl, err := c.clientFor(obj)
	if err != nil {
		return nil, err
	}
	if v == reconcile.Create {
		return cl.create(ctx, obj)
	}
	return cl.update(ctx, obj)
}

func (c *Controller) get(ctx context.Context, obj reconcile.Child) (reconcile.Child, error) {
	cl, err := c.clientFor(obj)
	if err != nil {
		return nil, err
	}
	return cl.get(ctx, obj.GetName())
}

func (c *Controller) delete(ctx context.Context, obj reconcile.Child, pre *metav1.Preconditions) error {
	cl, err := c.clientFor(obj)
	if err != nil {
		return err
	}
	return cl.delete(ctx, obj.GetName(), metav1.DeleteOptions{Preconditions: pre})
}
