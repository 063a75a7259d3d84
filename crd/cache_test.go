package crd

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// cacheCases are spec.cache forms and the message refusing each ("" lets it through).
var cacheCases = []struct{ cache, want string }{
	{`{claimName: weights}`, ""},
	{`{size: 100Gi}`, ""},
	{`{size: 100Gi, storageClassName: fast, accessModes: [ReadWriteOnce], tokenSecret: {name: hf, key: token}}`, ""},
	{`{}`, RuleCacheClaimXorSizeMsg},
	{`{claimName: weights, size: 100Gi}`, RuleCacheClaimXorSizeMsg},
	{`{claimName: weights, storageClassName: fast}`, RuleCacheManagedFieldsMsg},
	{`{claimName: weights, tokenSecret: {name: hf, key: token}}`, RuleCacheManagedFieldsMsg},
	{`{size: lots}`, RuleCacheSizeMsg},
	{`{size: "0"}`, RuleCacheSizeMsg},
	{`{size: 20Gi, source: s3://models/qwen3-0.6b, credentialsSecret: {name: s3}}`, ""},
	{`{size: 20Gi, source: s3://models, serviceAccountName: reader}`, ""},
	{`{source: "pvc://weights/models/qwen3"}`, ""},
	{`{source: s3://models/qwen3}`, RuleCacheClaimXorSizeMsg},
	{`{claimName: weights, source: s3://models/qwen3}`, RuleCacheS3SizeMsg},
	{`{size: 20Gi, source: "pvc://weights/x"}`, RuleCacheClaimXorSizeMsg},
	{`{claimName: weights, source: "pvc://weights/x"}`, RuleCacheClaimXorSizeMsg},
	{`{size: 20Gi, credentialsSecret: {name: s3}}`, RuleCacheS3FieldsMsg},
	{`{size: 20Gi, source: s3://models/q, tokenSecret: {name: hf, key: token}}`, RuleCacheS3NoTokenMsg},
	{`{source: "pvc://weights/../etc"}`, RuleCacheSourcePathMsg},
}

// TestCacheCEL: the CRD's rules on spec.cache refuse what cacheErrors refuses, with its messages.
func TestCacheCEL(t *testing.T) {
	evalCEL := newCELSpec(t)
	for _, tc := range cacheCases {
		j, err := yaml.YAMLToJSON([]byte(tc.cache))
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		if err := utiljson.Unmarshal(j, &c); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(evalCEL(t, map[string]any{"baseModel": "m", "replicas": int64(1), "cache": c}), "; ")
		var typed Cache
		if err := yaml.Unmarshal([]byte(tc.cache), &typed); err != nil {
			t.Fatal(err)
		}
		decoded := strings.Join(cacheErrors(&typed), "; ")
		for what, msg := range map[string]string{"CEL": got, "cacheErrors": decoded} {
			switch {
			case tc.want == "" && msg != "":
				t.Errorf("%s: %s refused: %s", tc.cache, what, msg)
			case tc.want != "" && !strings.Contains(msg, tc.want):
				t.Errorf("%s: %s: want %q, got %q", tc.cache, what, tc.want, msg)
			}
		}
	}
}

// TestCacheDeepCopied: conversion copies spec.cache, sharing nothing with its source.
func TestCacheDeepCopied(t *testing.T) {
	c := &Cache{Size: "1Gi", StorageClassName: new(string), AccessModes: []corev1.PersistentVolumeAccessMode{"ReadWriteMany"}, TokenSecret: &SecretKey{Name: "a", Key: "b"}, CredentialsSecret: &SecretRef{Name: "s"}}
	d := cloneCache(c)
	d.AccessModes[0], d.TokenSecret.Name, *d.StorageClassName, d.CredentialsSecret.Name = "ReadWriteOnce", "x", "y", "z"
	if c.AccessModes[0] != "ReadWriteMany" || c.TokenSecret.Name != "a" || c.CredentialsSecret.Name != "s" || *c.StorageClassName != "" {
		t.Errorf("cloneCache shares memory with its source: %+v", c)
	}
}
