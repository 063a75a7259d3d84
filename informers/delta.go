// A packed object's bytes as differences from its informer's dictionary: an object that
// informer packed before (packer). A model's children differ from another model's in little
// more than names, UIDs, resource versions and times, so each is written as S2 blocks against
// the dictionary (klauspost/compress's s2: an LZ77 block format with dictionaries, built for
// small payloads like these, and fuzzed upstream): a Deployment's 1.2 KB of protobuf in about
// 0.2 KB. What is stored reads back byte for byte.

package informers

import (
	"errors"
	"fmt"

	"github.com/klauspost/compress/s2"
)

// dictionary is what one informer's packed objects are written against. It never changes
// once made: every object packed against it points at it.
type dictionary struct {
	d *s2.Dict
}

// newDictionary is b as a dictionary; nil where S2 takes none (under 16 bytes). A longer b
// gives its last s2.MaxDictSize bytes.
func newDictionary(b []byte) *dictionary {
	d := s2.MakeDict(b, nil)
	if d == nil {
		return nil
	}
	return &dictionary{d: d}
}

// encode writes src against d, kept at its length: the object is cached for as long as it
// lives, without the room the encoder grew in (half of it in a run of 2,000 models,
// docs/benchmarks.md).
func (d *dictionary) encode(src []byte) []byte {
	dst := d.d.Encode(nil, src)
	out := make([]byte, len(dst))
	copy(out, dst)
	return out
}

var errCorrupt = errors.New("packed bytes do not decode against their dictionary")

// maxPacked bounds what decode makes: no cached object comes near it (an API object is at
// most about 1.5 MB, etcd's request limit).
const maxPacked = 64 << 20

// decode is encode's inverse; anything not written by encode against d is an error, never
// a panic.
func (d *dictionary) decode(src []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil || n > maxPacked {
		return nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	out, err := d.d.Decode(nil, src)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	return out, nil
}
