package pack

import (
	"bytes"
	"testing"

	"github.com/coffer-backup/coffer/internal/crypto"
)

// Whole accepts the full entry list of a real pack, in any order, and
// refuses any list that leaves a blob out or names one twice.
func TestWholeOnlyForEveryBlob(t *testing.T) {
	m, _ := crypto.NewMasterKey()
	enc, _ := crypto.NewKey(m)
	for _, key := range []*crypto.Key{enc, crypto.Null()} {
		blobs := [][]byte{bytes.Repeat([]byte{1}, 100), bytes.Repeat([]byte{2}, 37), bytes.Repeat([]byte{3}, 4000)}
		raw, entries := build(t, key, blobs)
		size := int64(len(raw))
		if !Whole(entries, size, key) {
			t.Fatal("the whole entry list is not whole")
		}
		if !Whole([]Entry{entries[2], entries[0], entries[1]}, size, key) {
			t.Fatal("order matters")
		}
		for i := range entries {
			less := append(append([]Entry{}, entries[:i]...), entries[i+1:]...)
			if Whole(less, size, key) {
				t.Fatalf("a list without blob %d is whole", i)
			}
		}
		twice := append([]Entry{}, entries...)
		twice[1].ID = twice[0].ID
		if Whole(twice, size, key) {
			t.Fatal("a list naming one chunk twice is whole")
		}
		if Whole(entries, size+1, key) || Whole(nil, size, key) {
			t.Fatal("a wrong size or an empty list is whole")
		}
	}
}
