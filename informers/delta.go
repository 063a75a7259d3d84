// A packed object's bytes as differences from its informer's dictionary: an object that
// informer packed before (packer). A model's children differ from another model's in little more than names,
// UIDs, resource versions and times, so each keeps a few copies from the dictionary and the
// bytes that differ (a Deployment's 1.2 KB of protobuf in about 0.2 KB). What is stored reads
// back byte for byte: the objects decoded from it are the stripped objects, field for field.

package informers

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// dictionary is what one informer's packed objects are written against. It never changes
// once made: every object packed against it points at it.
type dictionary struct {
	b []byte
	// table finds, by a hash of 4 bytes, the last place in b they start at, plus one (0: none).
	table []uint16
}

const (
	dictHashBits = 10
	// maxDictionary bounds what a dictionary keeps (table positions are uint16); a longer first
	// object gives its first maxDictionary bytes.
	maxDictionary = 1<<16 - 1
	// minCopy is the shortest run worth a copy: a copy costs its length, its place and the end
	// of the literal run before it (3 to 5 bytes).
	minCopy = 6
)

func newDictionary(b []byte) *dictionary {
	if len(b) > maxDictionary {
		b = b[:maxDictionary]
	}
	d := &dictionary{b: b, table: make([]uint16, 1<<dictHashBits)}
	for i := 0; i+4 <= len(b); i++ {
		d.table[hash4(b[i:])] = uint16(i + 1)
	}
	return d
}

func hash4(b []byte) uint32 {
	return binary.LittleEndian.Uint32(b) * 2654435761 >> (32 - dictHashBits)
}

func matchLen(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// encode writes src as its length, then literal runs each followed by a copy from the
// dictionary (its length and place), ending with a literal run (maybe empty):
//
//	len(src) (lit-len lit-bytes copy-len copy-place)* lit-len lit-bytes
//
// all numbers unsigned varints. A copy is tried where the last one would go on (the same
// place in the dictionary as in src since it, as a substitution such as one model's name for
// another's leaves the rest aligned) and where the table says these 4 bytes start.
func (d *dictionary) encode(src []byte) []byte {
	dst := binary.AppendUvarint(make([]byte, 0, len(src)/4+16), uint64(len(src)))
	lit, next := 0, -1
	for i := 0; i < len(src); {
		at, n := -1, 0
		if next >= 0 && next < len(d.b) {
			if l := matchLen(d.b[next:], src[i:]); l >= minCopy {
				at, n = next, l
			}
		}
		if i+4 <= len(src) {
			if p := int(d.table[hash4(src[i:])]) - 1; p >= 0 {
				if l := matchLen(d.b[p:], src[i:]); l >= minCopy && l > n {
					at, n = p, l
				}
			}
		}
		if n == 0 {
			i++
			if next >= 0 {
				next++
			}
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(i-lit))
		dst = append(dst, src[lit:i]...)
		dst = binary.AppendUvarint(dst, uint64(n))
		dst = binary.AppendUvarint(dst, uint64(at))
		i += n
		lit, next = i, at+n
	}
	dst = binary.AppendUvarint(dst, uint64(len(src)-lit))
	dst = append(dst, src[lit:]...)
	// Kept for as long as the object is cached: without the room dst grew with (half of it
	// in a run of 2,000 models, docs/benchmarks.md).
	out := make([]byte, len(dst))
	copy(out, dst)
	return out
}

var errCorrupt = errors.New("packed bytes do not decode against their dictionary")

// decode is encode's inverse; anything not written by encode against d is an error, never
// a panic.
func (d *dictionary) decode(src []byte) ([]byte, error) {
	uv := func() (int, bool) {
		v, n := binary.Uvarint(src)
		if n <= 0 || v > uint64(len(d.b))+uint64(len(src))+maxPacked {
			return 0, false
		}
		src = src[n:]
		return int(v), true
	}
	size, ok := uv()
	if !ok || size > maxPacked {
		return nil, errCorrupt
	}
	out := make([]byte, 0, size)
	for {
		l, ok := uv()
		if !ok || l > len(src) || len(out)+l > size {
			return nil, errCorrupt
		}
		out, src = append(out, src[:l]...), src[l:]
		if len(out) == size {
			break
		}
		n, ok := uv()
		if !ok {
			return nil, errCorrupt
		}
		at, ok := uv()
		if !ok || n == 0 || at+n > len(d.b) || len(out)+n > size {
			return nil, errCorrupt
		}
		out = append(out, d.b[at:at+n]...)
	}
	if len(src) != 0 {
		return nil, fmt.Errorf("%w: %d bytes past its end", errCorrupt, len(src))
	}
	return out, nil
}

// maxPacked bounds what decode makes: no cached object comes near it (an API object is at
// most about 1.5 MB, etcd's request limit).
const maxPacked = 64 << 20
