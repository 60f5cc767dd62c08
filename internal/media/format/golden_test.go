package format

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/coffer-backup/coffer/internal/testutil"
)

var updateGolden = flag.Bool("update", false, "record the golden files of a new media format version (TestGolden)")

// The fixed inputs of the golden blocks.
var (
	goldenHeader  = Header{Kind: KindData, Flags: FlagEndOfStream, Stream: 3, Session: SessionID{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf}, Seq: 41}
	goldenPayload = []byte("coffer golden media payload\n")
	goldenLabel   = VolumeLabel{Format: Version, Barcode: "GOLD01L9", Pool: "golden", MediaSet: "golden-set",
		Labelled: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), BlockSize: MinBlockSize}
)

// TestGolden encodes a data block and a volume label block from fixed
// inputs and compares their bytes with those committed for this media
// format version (testdata/golden/v<Version>), then decodes the blocks of
// every version with today's code. A mismatch means the media format
// changed: bump Version and record the new version's files (see "Golden
// bytes" in docs/design/repository-format.md).
func TestGolden(t *testing.T) {
	gf := testutil.Golden{Dir: "testdata/golden", Version: Version, Update: *updateGolden,
		Bump: "format.Version (internal/media/format/block.go)", Cmd: "go test ./internal/media/format -run TestGolden"}
	data := make([]byte, MinBlockSize)
	if err := EncodeBlock(data, goldenHeader, goldenPayload); err != nil {
		t.Fatal(err)
	}
	gf.Check(t, "media-block", data)
	payload, err := EncodeLabel(&goldenLabel, MinBlockSize)
	if err != nil {
		t.Fatal(err)
	}
	label := make([]byte, MinBlockSize)
	if err := EncodeBlock(label, Header{Kind: KindVolumeLabel, Session: goldenHeader.Session}, payload); err != nil {
		t.Fatal(err)
	}
	gf.CheckAs(t, "media-label", label, canonicalLabelBlock)
	for _, v := range gf.Versions(t) {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			want := goldenHeader
			want.Length = uint32(len(goldenPayload))
			h, p, err := DecodeBlock(gf.Read(t, v, "media-block"))
			if err != nil || h != want || !bytes.Equal(p, goldenPayload) {
				t.Errorf("the data block decodes to %+v %q, %v", h, p, err)
			}
			h, p, err = DecodeBlock(gf.Read(t, v, "media-label"))
			if err != nil || h.Kind != KindVolumeLabel {
				t.Fatalf("the label block decodes to %+v, %v", h, err)
			}
			if l, err := DecodeVolumeLabel(p); err != nil || *l != goldenLabel {
				t.Errorf("the volume label decodes to %+v, %v", l, err)
			}
		})
	}
}

// canonicalLabelBlock compares a label block by the JSON its zstd payload
// holds: a zstd release may encode the same JSON differently, which
// changes the payload's length and the checksum but not the format. The
// rest of the header is compared byte for byte.
func canonicalLabelBlock(b []byte) ([]byte, error) {
	if len(b) < HeaderSize {
		return nil, fmt.Errorf("block of %d bytes", len(b))
	}
	n := binary.LittleEndian.Uint32(b[40:])
	if int(n) > len(b)-HeaderSize {
		return nil, fmt.Errorf("payload length %d", n)
	}
	d, _ := zstd.NewReader(nil)
	defer d.Close()
	raw, err := d.DecodeAll(b[HeaderSize:HeaderSize+int(n)], nil)
	if err != nil {
		return nil, err
	}
	header := slices.Clone(b[:HeaderSize])
	clear(header[40:44]) // the payload length
	clear(header[48:52]) // the checksum
	return append(header, raw...), nil
}
