package vtl_test

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/media/mediatest"
	"github.com/coffer-backup/coffer/internal/media/vtl"
)

// newLibrary makes a library with small cartridges in slots 1..n.
func newLibrary(t *testing.T, cfg vtl.Config, n int) *vtl.Library {
	t.Helper()
	dir := t.TempDir()
	if err := vtl.Create(dir, cfg); err != nil {
		t.Fatal(err)
	}
	l, err := vtl.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := 1; i <= n; i++ {
		if err := l.AddCartridge(barcode(i), i, vtl.CartridgeInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func barcode(i int) string {
	return "CFR" + string(rune('0'+i/100%10)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10)) + "L8"
}

// TestConformance runs the media conformance suite on the VTL, every drive
// of a two-drive library.
func TestConformance(t *testing.T) {
	l := newLibrary(t, vtl.Config{Drives: 2, Slots: 4, ImportExport: 1, Capacity: 4 << 20}, 3)
	for i := range 2 {
		d, err := l.Drive(i)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(d.Name(), func(t *testing.T) {
			mediatest.Run(t, mediatest.Setup{Changer: l, Drive: d, DriveIndex: i, Scratch: [2]int{1, 2},
				Fill: true, SetWriteProtected: l.SetWriteProtected})
		})
	}
}
