package chunk

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"testing"
)

// TestFramesDecodeAcrossLibraries checks that a repository written by a
// cgo build (chunks compressed with the C library) restores with a build
// without cgo (klauspost/compress) and the other way round: each
// library's frames, at the levels a repository may be set to, decode with
// the other library to the same bytes. In a build without cgo both sides
// are klauspost/compress; CI runs this package both ways.
func TestFramesDecodeAcrossLibraries(t *testing.T) {
	inputs := crossInputs(t)
	for _, level := range []int{1, 3, 9} {
		build, err := newCompressor(level)
		if err != nil {
			t.Fatal(err)
		}
		pure, err := newGoCompressor(level)
		if err != nil {
			t.Fatal(err)
		}
		for name, data := range inputs {
			t.Run(fmt.Sprintf("level%d/%s", level, name), func(t *testing.T) {
				fromBuild, err := build.compress(nil, data)
				if err != nil {
					t.Fatal(err)
				}
				fromPure, err := pure.compress(nil, data)
				if err != nil {
					t.Fatal(err)
				}
				checkDecodes(t, Compressor+" frame, klauspost decoder", fromBuild, data, true)
				checkDecodes(t, "klauspost frame, build's decoder", fromPure, data, false)
			})
		}
	}
}

// checkDecodes decompresses frame with klauspost/compress (pure) or with
// the build's decompressor, after a prefix, as a restore's batch does.
func checkDecodes(t *testing.T, what string, frame, want []byte, pure bool) {
	t.Helper()
	prefix := []byte("earlier chunk")
	var got []byte
	var err error
	if pure {
		d, derr := newGoDecompressor(len(want))
		if derr != nil {
			t.Fatal(derr)
		}
		got, err = d.decompress(bytes.Clone(prefix), frame, len(want))
	} else {
		d, derr := newDecompressor(len(want))
		if derr != nil {
			t.Fatal(derr)
		}
		got, err = d.decompress(bytes.Clone(prefix), frame, len(want))
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("%s: %d bytes decoded differ from the %d compressed", what, len(got)-len(prefix), len(want))
	}
}

// crossInputs are chunks of the kinds a disk holds: program code (this
// test binary, which compresses like an OS disk's files), repetitive
// text, random bytes (stored raw by Encode, but a frame of them must
// still decode) and sizes from one byte to a large chunk.
func crossInputs(t *testing.T) map[string][]byte {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if len(code) < 4<<20 {
		t.Fatalf("test binary of %d bytes, want at least 4 MiB of code", len(code))
	}
	noise := make([]byte, 256<<10)
	_, _ = rand.Read(noise)
	return map[string][]byte{
		"code-256KiB": code[1<<20 : 1<<20+256<<10],
		"code-4MiB":   code[:4<<20],
		"text-1MiB":   bytes.Repeat([]byte("a line of a log file, 0123456789\n"), 1<<20/33+1)[:1<<20],
		"random":      noise,
		"one-byte":    {42},
		"odd-size":    code[7 : 7+100_003],
	}
}
