package chunk

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/coffer-backup/coffer/internal/crypto"
)

func keys(t *testing.T) []*crypto.Key {
	m, _ := crypto.NewMasterKey()
	k, _ := crypto.NewKey(m)
	return []*crypto.Key{k, crypto.Null()}
}

func TestRoundTripAndIncompressible(t *testing.T) {
	for _, key := range keys(t) {
		enc, err := NewEncoder(key, 1)
		if err != nil {
			t.Fatal(err)
		}
		dec, _ := NewDecoder(key, 1<<20)
		text := bytes.Repeat([]byte("compressible text "), 60000)[:1<<20]
		noise := make([]byte, 1<<20)
		_, _ = rand.Read(noise)
		for _, data := range [][]byte{text, noise, {}, {7}} {
			sealed, compressed := enc.Encode(nil, data)
			if compressed != bytes.Equal(data, text) {
				t.Fatalf("compressed=%v for a %d-byte input", compressed, len(data))
			}
			if !compressed && len(sealed) != len(data)+1+key.Overhead() {
				t.Fatalf("raw blob has %d bytes of overhead", len(sealed)-len(data))
			}
			want := dec.Hasher().Sum(data)
			got, err := dec.Decode(nil, sealed, want, len(data))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("decode: %v", err)
			}
			if _, err := dec.Decode(nil, sealed, dec.Hasher().Sum([]byte("other")), len(data)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("wrong ID accepted: %v", err)
			}
		}
	}
}

func TestLevelZeroStoresRaw(t *testing.T) {
	key := crypto.Null()
	enc, _ := NewEncoder(key, 0)
	data := bytes.Repeat([]byte{1}, 4096)
	if _, compressed := enc.Encode(nil, data); compressed {
		t.Fatal("level 0 compressed")
	}
}

func FuzzDecode(f *testing.F) {
	key := crypto.Null()
	enc, _ := NewEncoder(key, 3)
	dec, _ := NewDecoder(key, 1<<20)
	data := bytes.Repeat([]byte("abc"), 1000)
	sealed, _ := enc.Encode(nil, data)
	f.Add(sealed, len(data))
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 1<<20 {
			return
		}
		want := dec.Hasher().Sum(data)
		if out, err := dec.Decode(nil, b, want, n); err == nil && !bytes.Equal(out, data) {
			t.Fatal("different data accepted")
		}
	})
}

// TestDecodeHoldsTheRawLength checks that a compressed blob decodes only
// at the raw length the index gives (a frame that holds more or fewer
// bytes is corrupt, and nothing is written past the given length), and
// that Decode appends after what dst already holds, as a restore's batch
// buffer needs.
func TestDecodeHoldsTheRawLength(t *testing.T) {
	key := crypto.Null()
	enc, _ := NewEncoder(key, 1)
	dec, _ := NewDecoder(key, 1<<20)
	data := bytes.Repeat([]byte("a restored disk's bytes "), 10000)
	sealed, compressed := enc.Encode(nil, data)
	if !compressed {
		t.Fatal("text stored raw")
	}
	want := dec.Hasher().Sum(data)
	for _, n := range []int{0, 1, len(data) - 1, len(data) + 1, 2 * len(data)} {
		buf := make([]byte, 0, 3*len(data))
		if _, err := dec.Decode(buf, sealed, want, n); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("raw length %d of %d: %v", n, len(data), err)
		}
	}
	prefix := []byte("previous chunk")
	got, err := dec.Decode(append([]byte{}, prefix...), sealed, want, len(data))
	if err != nil || !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], data) {
		t.Fatalf("decode after a prefix: %v", err)
	}
}
