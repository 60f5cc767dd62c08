package format

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func sampleHeader() Header {
	return Header{Kind: KindData, Flags: FlagEndOfStream, Stream: 3, Session: SessionID{1, 2, 3}, Seq: 41}
}

func TestBlockRoundTrip(t *testing.T) {
	block := make([]byte, MinBlockSize)
	payload := bytes.Repeat([]byte("coffer"), 100)
	if err := EncodeBlock(block, sampleHeader(), payload); err != nil {
		t.Fatal(err)
	}
	h, got, err := DecodeBlock(block)
	if err != nil {
		t.Fatal(err)
	}
	want := sampleHeader()
	want.Length = uint32(len(payload))
	if h != want || !bytes.Equal(got, payload) {
		t.Fatalf("decoded %+v %d bytes", h, len(got))
	}
}

// Every single flipped bit of header or payload is caught, a cut record
// is torn, and a foreign record is not coffer's.
func TestBlockDamage(t *testing.T) {
	block := make([]byte, MinBlockSize)
	payload := []byte("the payload")
	EncodeBlock(block, sampleHeader(), payload)
	for i := 0; i < HeaderSize+len(payload); i++ {
		for bit := range 8 {
			b := bytes.Clone(block)
			b[i] ^= 1 << bit
			if _, _, err := DecodeBlock(b); err == nil {
				t.Fatalf("bit %d of byte %d flipped: decoded", bit, i)
			}
		}
	}
	if _, _, err := DecodeBlock(block[:len(block)/2]); !errors.Is(err, ErrTorn) {
		t.Fatalf("half a block: %v", err)
	}
	if _, _, err := DecodeBlock(make([]byte, MinBlockSize)); !errors.Is(err, ErrNotCoffer) {
		t.Fatalf("zeros: %v", err)
	}
	if err := EncodeBlock(block, sampleHeader(), make([]byte, MinBlockSize)); err == nil {
		t.Fatal("an oversized payload was encoded")
	}
}

func sampleIndex() *VolumeIndex {
	return &VolumeIndex{
		Label:   VolumeLabel{Format: Version, Barcode: "CFR001L8", Pool: "weekly", MediaSet: "a1b2", Labelled: time.Unix(1e9, 0).UTC(), BlockSize: DefaultBlockSize},
		Written: time.Unix(2e9, 0).UTC(),
		Segments: []Segment{{StreamInfo: StreamInfo{Stream: 1, Point: "p1", VM: "web", Repository: "r"}, Session: SessionID{9},
			Extents: []Extent{{Pos: 3, Count: 4}, {Pos: 9, Count: 2}}, FirstSeq: 0, LastSeq: 5, Bytes: 100, End: true}},
	}
}

func TestIndexRoundTrip(t *testing.T) {
	p, err := EncodeLabel(sampleIndex(), MinBlockSize)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := DecodeVolumeIndex(p)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Label != sampleIndex().Label || len(ix.Segments) != 1 || ix.Segments[0].Last() != 10 || ix.Segments[0].Session != (SessionID{9}) {
		t.Fatalf("decoded %+v", ix)
	}
}

func TestIndexRefusesIncoherentSegments(t *testing.T) {
	for name, mutate := range map[string]func(*VolumeIndex){
		"no extents":        func(ix *VolumeIndex) { ix.Segments[0].Extents = nil },
		"count vs sequence": func(ix *VolumeIndex) { ix.Segments[0].LastSeq = 9 },
		"extents backwards": func(ix *VolumeIndex) { ix.Segments[0].Extents[1].Pos = 2 },
		"bad barcode":       func(ix *VolumeIndex) { ix.Label.Barcode = "../x" },
		"block size":        func(ix *VolumeIndex) { ix.Label.BlockSize = 1000 },
	} {
		ix := sampleIndex()
		mutate(ix)
		p, err := EncodeLabel(ix, DefaultBlockSize)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeVolumeIndex(p); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := DecodeVolumeIndex([]byte("not zstd")); err == nil || !strings.Contains(err.Error(), "label") {
		t.Errorf("garbage: %v", err)
	}
}

func TestSessionLabelRefusesDuplicateStreams(t *testing.T) {
	l := SessionLabel{Session: SessionID{1}, Streams: []StreamInfo{{Stream: 1, Point: "a"}, {Stream: 1, Point: "b"}}}
	p, _ := EncodeLabel(l, DefaultBlockSize)
	if _, err := DecodeSessionLabel(p); err == nil {
		t.Fatal("decoded")
	}
}

func TestLabelTooLargeForBlock(t *testing.T) {
	ix := sampleIndex()
	for i := range 2000 {
		s := ix.Segments[0]
		s.Point = strings.Repeat("x", 40) + string(rune('a'+i%26)) + strings.Repeat("y", i%50)
		s.Session[0] = byte(i)
		s.Session[1] = byte(i >> 8)
		ix.Segments = append(ix.Segments, s)
	}
	if _, err := EncodeLabel(ix, MinBlockSize); err == nil {
		t.Fatal("an index larger than a block was encoded")
	}
}
