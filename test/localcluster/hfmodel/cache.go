// What the kubelet's volumes already hold: the Hugging Face cache of every model downloaded
// onto each, shared by every fake server of one kubelet, whichever engine it plays.

package hfmodel

import (
	"strings"
	"sync"
)

// WeightsCache is what each volume already holds: the Hugging Face cache of every model
// downloaded onto it. It lives as long as the kubelet, so a PVC or an emptyDir keeps its
// weights across container restarts exactly as far as its identity says. A nil cache
// holds nothing (every start downloads).
type WeightsCache struct {
	mu   sync.Mutex
	held map[string]bool // volume identity + "\x00" + model id
	// partial are the bytes an Interrupted `hf download` left (its .incomplete blobs), which
	// the next one resumes from (hf_download.go).
	partial map[string]int64
	// bytes are what each held repo takes on its volume (0 when not known), so a volume's
	// capacity bounds the next download onto it.
	bytes map[string]int64
}

// NewWeightsCache is the cache one kubelet's servers share.
func NewWeightsCache() *WeightsCache {
	return &WeightsCache{held: map[string]bool{}, partial: map[string]int64{}, bytes: map[string]int64{}}
}

// ResumeFrom is what an Interrupted download of model left on volume.
func (c *WeightsCache) ResumeFrom(volume, model string) int64 {
	if c == nil || volume == "" {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.partial[volume+"\x00"+model]
}

// Interrupted records the bytes a stopped download of model left on volume.
func (c *WeightsCache) Interrupted(volume, model string, n int64) {
	if c == nil || volume == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partial[volume+"\x00"+model] = n
}

// Has reports whether model is held on volume.
func (c *WeightsCache) Has(volume, model string) bool {
	if c == nil || volume == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[volume+"\x00"+model]
}

// HasDirs reports whether a fill copied a directory of weights onto volume (an s3:// fill,
// held as "dir:" and its path on the volume): what else is on it is then known.
func (c *WeightsCache) HasDirs(volume string) bool {
	if c == nil || volume == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.held {
		if strings.HasPrefix(k, volume+"\x00dir:") {
			return true
		}
	}
	return false
}

// Put records model held on volume, its size not known.
func (c *WeightsCache) Put(volume, model string) { c.Store(volume, model, 0) }

// Store records model held on volume, taking n bytes there.
func (c *WeightsCache) Store(volume, model string, n int64) {
	if c == nil || volume == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held[volume+"\x00"+model] = true
	c.bytes[volume+"\x00"+model] = n
	delete(c.partial, volume+"\x00"+model)
}

// UsedBy is what the other repos on volume take there, held or partial.
func (c *WeightsCache) UsedBy(volume, except string) int64 {
	if c == nil || volume == "" {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, m := range []map[string]int64{c.bytes, c.partial} {
		for k, v := range m {
			if strings.HasPrefix(k, volume+"\x00") && k != volume+"\x00"+except {
				n += v
			}
		}
	}
	return n
}

// Forget drops every model held on a volume (the volume was deleted).
func (c *WeightsCache) Forget(volume string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.held {
		if strings.HasPrefix(k, volume+"\x00") {
			delete(c.held, k)
		}
	}
	for k := range c.partial {
		if strings.HasPrefix(k, volume+"\x00") {
			delete(c.partial, k)
		}
	}
	for k := range c.bytes {
		if strings.HasPrefix(k, volume+"\x00") {
			delete(c.bytes, k)
		}
	}
}

// ForgetPrefix drops every model held on the volumes whose identity starts with prefix (a
// deleted pod's emptyDirs).
func (c *WeightsCache) ForgetPrefix(prefix string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.held {
		if strings.HasPrefix(k, prefix) {
			delete(c.held, k)
		}
	}
	for k := range c.partial {
		if strings.HasPrefix(k, prefix) {
			delete(c.partial, k)
		}
	}
	for k := range c.bytes {
		if strings.HasPrefix(k, prefix) {
			delete(c.bytes, k)
		}
	}
}
