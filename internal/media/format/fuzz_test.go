package format

import (
	"bytes"
	"testing"
)

// FuzzDecodeBlock: whatever decodes encodes back to the same bytes.
func FuzzDecodeBlock(f *testing.F) {
	b := make([]byte, MinBlockSize)
	EncodeBlock(b, sampleHeader(), []byte("payload"))
	f.Add(b)
	f.Add(b[:100])
	f.Fuzz(func(t *testing.T, rec []byte) {
		h, payload, err := DecodeBlock(rec)
		if err != nil {
			return
		}
		again := make([]byte, len(rec))
		if err := EncodeBlock(again, h, payload); err != nil {
			t.Fatal(err)
		}
		// Padding is not covered by the checksum; compare what is.
		if !bytes.Equal(again[:HeaderSize+len(payload)], rec[:HeaderSize+len(payload)]) {
			t.Fatal("re-encoding differs")
		}
	})
}

func FuzzDecodeVolumeIndex(f *testing.F) {
	p, _ := EncodeLabel(sampleIndex(), DefaultBlockSize)
	f.Add(p)
	f.Fuzz(func(t *testing.T, payload []byte) {
		ix, err := DecodeVolumeIndex(payload)
		if err != nil {
			return
		}
		for i := range ix.Segments {
			if ix.Segments[i].First() < 1 || ix.Segments[i].Last() < ix.Segments[i].First() {
				t.Fatalf("segment %d accepted with positions %d..%d", i, ix.Segments[i].First(), ix.Segments[i].Last())
			}
		}
	})
}

func FuzzDecodeLabels(f *testing.F) {
	l := sampleIndex().Label
	p, _ := EncodeLabel(&l, DefaultBlockSize)
	f.Add(p)
	s, _ := EncodeLabel(SessionLabel{Session: SessionID{1}, Streams: []StreamInfo{{Stream: 1, Point: "a"}}}, DefaultBlockSize)
	f.Add(s)
	f.Fuzz(func(t *testing.T, payload []byte) {
		if l, err := DecodeVolumeLabel(payload); err == nil && l.Validate() != nil {
			t.Fatal("an invalid volume label decoded")
		}
		_, _ = DecodeSessionLabel(payload)
	})
}
