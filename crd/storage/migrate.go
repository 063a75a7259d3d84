// Package storage migrates stored InferenceServices to the CRD's storage version: after the
// storage version changes (v1alpha1 to v1beta1, or back on a rollback) every object is rewritten
// by an unchanged update, then status.storedVersions is set to the storage version alone, so the
// old version can later be removed from the CRD.
package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/crd"
)

// FieldManager names the migration's writes.
const FieldManager = "inferenceservice-operator-storage-migration"

// Result is what one migration did.
type Result struct {
	// StorageVersion is the CRD's storage version; StoredVersions what status listed before.
	StorageVersion string
	StoredVersions []string
	// Objects were listed and rewritten; nothing is done when only the storage version is stored.
	Objects int
	Done    bool
}

// State reads the CRD's storage version and status.storedVersions.
func State(ctx context.Context, dyn dynamic.Interface) (storage string, stored []string, rv string, err error) {
	u, err := dyn.Resource(crd.CRDResource).Get(ctx, crd.CRDName, metav1.GetOptions{})
	if err != nil {
		return "", nil, "", fmt.Errorf("reading CRD %s: %w", crd.CRDName, err)
	}
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]interface{})
		if s, _ := m["storage"].(bool); s {
			storage, _ = m["name"].(string)
		}
	}
	stored, _, _ = unstructured.NestedStringSlice(u.Object, "status", "storedVersions")
	if storage == "" {
		return "", nil, "", fmt.Errorf("CRD %s has no storage version", crd.CRDName)
	}
	return storage, stored, u.GetResourceVersion(), nil
}

// Migrate rewrites every InferenceService in the storage version when another version is
// still listed as stored, then records the storage version as the only one stored. It is
// idempotent and safe to run from several places: unchanged updates of an object already in
// the storage version write nothing, and the storedVersions patch is guarded by the CRD's
// resourceVersion.
func Migrate(ctx context.Context, dyn dynamic.Interface) (Result, error) {
	storage, stored, _, err := State(ctx, dyn)
	if err != nil {
		return Result{}, err
	}
	res := Result{StorageVersion: storage, StoredVersions: stored}
	if slices.Equal(stored, []string{storage}) {
		return res, nil
	}
	isvcs := dyn.Resource(schema.GroupVersionResource{Group: crd.Group, Version: storage, Resource: crd.Plural})
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := isvcs.List(ctx, opts)
		if err != nil {
			return res, fmt.Errorf("listing %s in %s: %w", crd.Plural, storage, err)
		}
		for i := range list.Items {
			if err := rewrite(ctx, isvcs, &list.Items[i]); err != nil {
				return res, err
			}
			res.Objects++
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			break
		}
	}
	// Re-read: the storage version must not have changed while objects were rewritten, and the
	// patch is guarded by this resourceVersion.
	now, _, rv, err := State(ctx, dyn)
	if err != nil {
		return res, err
	}
	if now != storage {
		return res, fmt.Errorf("storage version changed from %s to %s during the migration", storage, now)
	}
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": rv},
		"status":   map[string]any{"storedVersions": []string{storage}},
	})
	if _, err := dyn.Resource(crd.CRDResource).Patch(ctx, crd.CRDName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}, "status"); err != nil {
		return res, fmt.Errorf("setting storedVersions of CRD %s: %w", crd.CRDName, err)
	}
	res.Done = true
	return res, nil
}

// rewrite updates obj unchanged, so the API server stores it again in the storage version; on
// a conflict it re-reads and tries again, a deleted object needs nothing.
func rewrite(ctx context.Context, isvcs dynamic.NamespaceableResourceInterface, obj *unstructured.Unstructured) error {
	cur := obj
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := isvcs.Namespace(cur.GetNamespace()).Update(ctx, cur, metav1.UpdateOptions{FieldManager: FieldManager})
		if apierrors.IsConflict(err) {
			if fresh, gerr := isvcs.Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{}); gerr == nil {
				cur = fresh
			}
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rewriting %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// Run migrates now and every period until ctx is done, so a storage version changed while the
// operator runs is migrated too; errors are logged and retried next period.
func Run(ctx context.Context, dyn dynamic.Interface, period time.Duration) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		res, err := Migrate(ctx, dyn)
		switch {
		case err != nil:
			klog.ErrorS(err, "Storage version migration failed; retrying", "crd", crd.CRDName, "after", period)
		case res.Done:
			klog.InfoS("Migrated InferenceServices to the storage version", "version", res.StorageVersion, "objects", res.Objects, "storedVersionsBefore", res.StoredVersions)
		}
	}, period)
}
