package pack

import (
	"bytes"
	"errors"
	"testing"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
)

func build(t testing.TB, key *crypto.Key, blobs [][]byte) ([]byte, []Entry) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, key)
	if err != nil {
		t.Fatal(err)
	}
	var want []Entry
	for _, b := range blobs {
		e, err := w.Add(id.Random(), b, len(b)*2)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if int64(buf.Len()) != w.Size() {
		t.Fatalf("size %d, wrote %d", w.Size(), buf.Len())
	}
	return buf.Bytes(), want
}

func reader(b []byte) func(off, n int64) ([]byte, error) {
	return func(off, n int64) ([]byte, error) {
		if off < 0 || off+n > int64(len(b)) {
			return nil, errors.New("range")
		}
		return b[off : off+n], nil
	}
}

func TestTrailerRoundTrip(t *testing.T) {
	m, _ := crypto.NewMasterKey()
	key, _ := crypto.NewKey(m)
	for _, n := range []int{0, 1, 5000} { // 5000 entries: trailer bigger than one tail read
		blobs := make([][]byte, n)
		for i := range blobs {
			blobs[i] = bytes.Repeat([]byte{byte(i)}, 10+i%7)
		}
		raw, want := build(t, key, blobs)
		if err := CheckHeader(raw); err != nil {
			t.Fatal(err)
		}
		got, err := ReadTrailer(reader(raw), int64(len(raw)), key)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d entries, want %d", len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] || !bytes.Equal(raw[got[i].Offset:got[i].Offset+got[i].Length], blobs[i]) {
				t.Fatalf("entry %d mismatch", i)
			}
		}
	}
}

func TestDamagedPacks(t *testing.T) {
	key := crypto.Null()
	raw, _ := build(t, key, [][]byte{[]byte("aaaa"), []byte("bbbbbbbb")})
	for name, bad := range map[string][]byte{
		"truncated":     raw[:len(raw)-3],
		"tiny":          raw[:10],
		"trailer flip":  flip(raw, len(raw)-20),
		"length absurd": append(append([]byte(nil), raw[:len(raw)-8]...), 0xff, 0xff, 0xff, 0x7f, 'C', 'F', 'P', 'T'),
	} {
		if _, err := ReadTrailer(reader(bad), int64(len(bad)), key); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := CheckHeader(flip(raw, 9)); !errors.Is(err, ErrFormat) {
		t.Fatalf("unknown version accepted: %v", err)
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x10
	return c
}

func TestObjectNames(t *testing.T) {
	var s SessionPrefix
	s[0] = 0xab
	p := MakeID(s, 7)
	got, err := ParseObjectName(ObjectName(p))
	if err != nil || got != p || got.Session() != s {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if len(SessionObjectPrefix(s)) >= len(ObjectName(p)) || ObjectName(p)[:len(SessionObjectPrefix(s))] != SessionObjectPrefix(s) {
		t.Fatal("session prefix is not a prefix of its packs' names")
	}
	for _, bad := range []string{"data/xyz", "index/00", "data/" + p.String() + "0"} {
		if _, err := ParseObjectName(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzReadTrailer(f *testing.F) {
	key := crypto.Null()
	raw, _ := build(f, key, [][]byte{[]byte("x"), []byte("yy")})
	f.Add(raw)
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := ReadTrailer(reader(b), int64(len(b)), key)
		if err != nil {
			return
		}
		for _, e := range entries {
			if int(e.Offset)+int(e.Length) > len(b) {
				t.Fatalf("entry outside the pack accepted")
			}
		}
	})
}

// TestResetWritesIndependentPacks: a writer reused with Reset writes each
// pack with its own header and trailer, the second listing only its own
// blobs even when it holds fewer than the first.
func TestResetWritesIndependentPacks(t *testing.T) {
	m, _ := crypto.NewMasterKey()
	key, _ := crypto.NewKey(m)
	var first, second bytes.Buffer
	w, err := NewWriter(&first, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, round := range []struct {
		out   *bytes.Buffer
		blobs int
	}{{&first, 300}, {&second, 7}} {
		if round.out == &second {
			if err := w.Reset(&second); err != nil {
				t.Fatal(err)
			}
		}
		var want []Entry
		for i := range round.blobs {
			e, err := w.Add(id.Random(), bytes.Repeat([]byte{byte(i)}, 20), 40)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, e)
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		raw := round.out.Bytes()
		if err := CheckHeader(raw); err != nil || int64(len(raw)) != w.Size() {
			t.Fatalf("pack of %d blobs: header %v, %d bytes written, writer says %d", round.blobs, err, len(raw), w.Size())
		}
		got, err := ReadTrailer(reader(raw), int64(len(raw)), key)
		if err != nil || len(got) != len(want) {
			t.Fatalf("pack of %d blobs: trailer lists %d (%v)", round.blobs, len(got), err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("pack of %d blobs, entry %d: %+v, want %+v", round.blobs, i, got[i], want[i])
			}
		}
	}
}
