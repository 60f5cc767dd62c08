package volume_test

import (
	"context"
	"testing"

	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/media/volume"
)

// loadCounter counts the cartridges loaded into a drive: on a real
// library each load and label read takes a minute or more.
type loadCounter struct {
	media.Changer
	loads int
}

func (c *loadCounter) Load(slot, drive int) error {
	c.loads++
	return c.Changer.Load(slot, drive)
}

// TestPoolChoosesFromTheCatalogue: with the media catalogue, a pool's
// appendable volume is loaded first, not found by loading each cartridge
// in turn; a full volume and another pool's are passed over; a catalogue
// that is wrong (it says full of a volume that is not) costs loads, never
// the volume.
func TestPoolChoosesFromTheCatalogue(t *testing.T) {
	e := newEnv(t, 5, 16<<20)
	ctx := context.Background()
	// CFR001 daily, CFR002 weekly (full, as the catalogue says), CFR003
	// daily, CFR004 weekly appendable, CFR005 blank.
	for i, pool := range map[int]string{1: "daily", 2: "weekly", 3: "daily", 4: "weekly"} {
		if err := e.vl.Load(code(i)); err != nil {
			t.Fatal(err)
		}
		if _, err := volume.Label(e.vl.Drive, volume.LabelOptions{Barcode: code(i), Pool: pool, BlockSize: blockSize}); err != nil {
			t.Fatal(err)
		}
	}
	catalogue := map[string]volume.Catalogued{code(1): {Pool: "daily"}, code(2): {Pool: "weekly", Full: true},
		code(3): {Pool: "daily"}, code(4): {Pool: "weekly"}}
	find := func(cat map[string]volume.Catalogued) (string, int) {
		t.Helper()
		counter := &loadCounter{Changer: e.vl.Changer}
		lib := &volume.Library{Changer: counter, Drive: e.vl.Drive}
		if err := e.vl.Changer.Unload(0, 0); err != nil { // the drive starts empty
			t.Fatal(err)
		}
		p := &volume.Pool{Lib: lib, Name: "weekly", BlockSize: blockSize, Catalogue: cat}
		v, err := p.First(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v.Label.Barcode, counter.loads
	}
	// Without the catalogue, CFR002 (not full on tape) is the first found.
	if bc, loads := find(nil); bc != code(2) || loads != 2 {
		t.Fatalf("without the catalogue: %s after %d loads, want %s after 2", bc, loads, code(2))
	}
	if bc, loads := find(catalogue); bc != code(4) || loads != 1 {
		t.Fatalf("with the catalogue: %s after %d loads, want %s after 1", bc, loads, code(4))
	}
	// A stale catalogue: every weekly volume said full. The blank one is
	// labelled first (the catalogue does not know it); CFR002 and CFR004
	// are still found when no blank is left.
	stale := map[string]volume.Catalogued{code(1): {Pool: "daily"}, code(2): {Pool: "weekly", Full: true},
		code(3): {Pool: "daily"}, code(4): {Pool: "weekly", Full: true}}
	if bc, _ := find(stale); bc != code(5) {
		t.Fatalf("with a stale catalogue: %s, want the blank %s labelled", bc, code(5))
	}
	stale[code(5)] = volume.Catalogued{Pool: "weekly", Full: true}
	if bc, _ := find(stale); bc != code(2) {
		t.Fatalf("with a catalogue wrong about every volume: %s, want %s found on tape", bc, code(2))
	}
}
