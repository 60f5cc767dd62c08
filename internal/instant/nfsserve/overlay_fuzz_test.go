package nfsserve

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"testing"
)

// FuzzOverlayReadsAsWritten applies a fuzzed sequence of writes (offset,
// length, byte) to an overlay and to a plain copy of the disk: after
// each, and after the overlay is reopened from its files, the overlay
// reads as the copy and the base disk is unchanged. Writes past the end
// are refused and change nothing.
func FuzzOverlayReadsAsWritten(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 7, 0xff, 0xf0, 0x10, 3, 0x55})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const size = 5*BlockSize + 512
		base := randomDisk(9, size)
		orig := bytes.Clone(base)
		p := filepath.Join(t.TempDir(), "d")
		o, err := OpenOverlay(p, bytes.NewReader(base), size)
		if err != nil {
			t.Fatal(err)
		}
		want := bytes.Clone(base)
		for len(ops) >= 5 {
			off := int64(binary.LittleEndian.Uint16(ops)) % (size + 64)
			n := int(binary.LittleEndian.Uint16(ops[2:])) % (3 * BlockSize)
			b := ops[4]
			ops = ops[5:]
			_, err := o.WriteAt(bytes.Repeat([]byte{b}, n), off)
			if off+int64(n) > size {
				if err == nil {
					t.Fatalf("a write of %d at %d past the end was taken", n, off)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			copy(want[off:], bytes.Repeat([]byte{b}, n))
		}
		check := func(o *Overlay, when string) {
			got := make([]byte, size)
			if n, err := o.ReadAt(got, 0); err != nil || n != size || !bytes.Equal(got, want) {
				t.Fatalf("%s: the overlay does not read as written (%d, %v)", when, n, err)
			}
		}
		check(o, "open")
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		o, err = OpenOverlay(p, bytes.NewReader(base), size)
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		check(o, "reopened")
		if !bytes.Equal(base, orig) {
			t.Fatal("a write reached the base disk")
		}
	})
}
