package informers

import (
	"fmt"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/example/inferenceservice-operator/informers/kinds"
)

// packed is a stripped child as the cache keeps it: its key, its instance and node (what the
// store, the byInstance index and PodsOnNode read) and the object itself as protobuf, decoded
// on each read. A typed object's structs, maps and strings take five times its protobuf (a
// model's Deployment, ReplicaSet, Pod, Service and HPA: 16 KB typed, 5.5 KB packed with keys
// and index entries, TestCachedBytesPerModel), and the caches are most of the operator's heap.
// The protobuf is kept as its differences from the informer's dictionary (delta.go), a fifth
// of its size for a model's children (issue 55: 10,000 models in 128 MiB).
type packed struct {
	key      string // namespace/name
	instance string // kinds.InstanceLabel's value; empty without it
	node     string // a pod's spec.nodeName
	raw      []byte // the protobuf (JSON for packedJSON), or its differences from dict
	dict     *dictionary
}

// packer is one informer's dictionary, made of the first object it packs, and remade of a
// later one that it writes poorly (more than half its size): the first pod an informer sees is
// pending, without the status every running pod has, the first HPA has not reported yet. An
// object keeps the dictionary it was written against; a new one serves the objects written
// after it (every later update of the older ones too), and the old one goes with the last
// object that points at it. At most maxDictionaries are made, so objects of two shapes
// written in turn cannot make one each.
type packer struct {
	dict atomic.Pointer[dictionary]
	made atomic.Int32
}

const maxDictionaries = 8

// store sets p's bytes from b: as differences from the dictionary where they are shorter,
// else b itself (an object that makes a dictionary, or one unlike it).
func (k *packer) store(p *packed, b []byte) {
	p.raw, p.dict = b, nil
	d := k.dict.Load()
	var enc []byte
	if d != nil {
		enc = d.encode(b)
	}
	if (d == nil || 2*len(enc) > len(b)) && k.made.Add(1) <= maxDictionaries {
		k.dict.CompareAndSwap(d, newDictionary(b))
		return
	}
	if d != nil && len(enc) < len(b) {
		p.raw, p.dict = enc, d
	}
}

// bytes is what store was given.
func (p *packed) bytes() ([]byte, error) {
	if p.dict == nil {
		return p.raw, nil
	}
	b, err := p.dict.decode(p.raw)
	if err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", p.key, err)
	}
	return b, nil
}

// GetObjectMeta gives the store's key function (meta.Accessor) the namespace and name.
func (p *packed) GetObjectMeta() metav1.Object {
	ns, name, _ := strings.Cut(p.key, "/")
	return &metav1.ObjectMeta{Namespace: ns, Name: name}
}

// protoObject is a generated API type: its protobuf encoding is its own.
type protoObject interface {
	runtime.Object
	metav1.Object
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// pack is an informer transform: strip, then pack. An object already packed (a transform may
// be handed one again) or of no generated type is kept as it is.
func pack(strip cache.TransformFunc) cache.TransformFunc {
	k := &packer{}
	return func(obj interface{}) (interface{}, error) {
		if _, ok := obj.(*packed); ok {
			return obj, nil
		}
		obj, err := strip(obj)
		if err != nil {
			return nil, err
		}
		o, ok := obj.(protoObject)
		if !ok {
			return obj, nil
		}
		raw, err := o.Marshal()
		if err != nil {
			return nil, fmt.Errorf("packing %T %s/%s: %w", obj, o.GetNamespace(), o.GetName(), err)
		}
		p := &packed{key: o.GetNamespace() + "/" + o.GetName(), instance: o.GetLabels()[kinds.InstanceLabel]}
		k.store(p, raw)
		if pod, ok := obj.(*corev1.Pod); ok {
			p.node = pod.Spec.NodeName
		}
		return p, nil
	}
}

// unpack decodes what a packed cache holds into a new T; anything else must already be a T.
func unpack[T any, PT interface {
	*T
	protoObject
}](obj interface{}) (PT, error) {
	p, ok := obj.(*packed)
	if !ok {
		if t, ok := obj.(PT); ok {
			return t, nil
		}
		return nil, fmt.Errorf("cache holds %T, not %T", obj, PT(nil))
	}
	b, err := p.bytes()
	if err != nil {
		return nil, err
	}
	t := PT(new(T))
	if err := t.Unmarshal(b); err != nil {
		return nil, fmt.Errorf("unpacking %T %s: %w", t, p.key, err)
	}
	return t, nil
}

// unpacked hands eh the typed objects of a packed cache. A resync's update, the same cached
// object as old and new, is decoded once.
func unpacked[T any, PT interface {
	*T
	protoObject
}](eh cache.ResourceEventHandler) cache.ResourceEventHandler {
	decode := func(obj interface{}) (interface{}, bool) {
		t, err := unpack[T, PT](obj)
		if err != nil {
			utilruntime.HandleError(err)
			return nil, false
		}
		return t, true
	}
	return decoded(eh, decode)
}

// unpackedOrNil is unpacked, and nil for no handler.
func unpackedOrNil[T any, PT interface {
	*T
	protoObject
}](eh cache.ResourceEventHandler) cache.ResourceEventHandler {
	if eh == nil {
		return nil
	}
	return unpacked[T, PT](eh)
}

// instanceOf is the namespace and InstanceLabel of a cached object, packed or not.
func instanceOf(obj interface{}) (namespace, instance string, ok bool) {
	if p, isPacked := obj.(*packedJSON); isPacked {
		obj = &p.packed
	}
	if p, isPacked := obj.(*packed); isPacked {
		ns, _, _ := strings.Cut(p.key, "/")
		return ns, p.instance, p.instance != ""
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return "", "", false
	}
	instance, ok = acc.GetLabels()[kinds.InstanceLabel]
	return acc.GetNamespace(), instance, ok
}

// packedJSON is an optional child (unstructured, from a dynamic informer) as the cache keeps
// it: its key and its JSON, decoded on each read. Its maps and interfaces take about three
// times its JSON (a model's NetworkPolicy: the largest part of the heap that grew with the
// models at 10,000 before this, docs/benchmarks.md).
type packedJSON struct {
	packed
}

// packJSON is the optional children's informer transform: strip, then keep the JSON. An
// object already packed, or not unstructured, is kept as it is.
func packJSON(strip cache.TransformFunc) cache.TransformFunc {
	k := &packer{}
	return func(obj interface{}) (interface{}, error) {
		if _, ok := obj.(*packedJSON); ok {
			return obj, nil
		}
		obj, err := strip(obj)
		if err != nil {
			return nil, err
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		raw, err := u.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("packing %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		p := &packedJSON{packed{key: u.GetNamespace() + "/" + u.GetName(), instance: u.GetLabels()[kinds.InstanceLabel]}}
		k.store(&p.packed, raw)
		return p, nil
	}
}

// unpackJSON decodes what an optional child's cache holds into a new object; anything else
// must already be unstructured.
func unpackJSON(obj interface{}) (*unstructured.Unstructured, error) {
	p, ok := obj.(*packedJSON)
	if !ok {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return u, nil
		}
		return nil, fmt.Errorf("cache holds %T, not an unstructured object", obj)
	}
	b, err := p.bytes()
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", p.key, err)
	}
	return u, nil
}

// unpackedJSON hands eh the decoded objects of an optional child's cache (nil for no handler).
func unpackedJSON(eh cache.ResourceEventHandler) cache.ResourceEventHandler {
	if eh == nil {
		return nil
	}
	decode := func(obj interface{}) (interface{}, bool) {
		u, err := unpackJSON(obj)
		if err != nil {
			utilruntime.HandleError(err)
			return nil, false
		}
		return u, true
	}
	return decoded(eh, decode)
}

// decoded hands eh the objects decode makes of a cache's stored form; one that does not
// decode is reported and not handed on. A resync's update, the same cached object as old and
// new, is decoded once.
func decoded(eh cache.ResourceEventHandler, decode func(interface{}) (interface{}, bool)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj interface{}, initial bool) {
			if t, ok := decode(obj); ok {
				eh.OnAdd(t, initial)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, ok := decode(oldObj)
			if !ok {
				return
			}
			n := o
			if oldObj != newObj {
				if n, ok = decode(newObj); !ok {
					return
				}
			}
			eh.OnUpdate(o, n)
		},
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				if d.Obj, ok = decode(d.Obj); ok {
					eh.OnDelete(d)
				}
				return
			}
			if t, ok := decode(obj); ok {
				eh.OnDelete(t)
			}
		},
	}
}
