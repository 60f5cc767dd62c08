package media

import (
	"reflect"
	"strings"
	"testing"
)

// realMtx is `mtx status` as an HP MSL library prints it (spacing kept,
// including mtx's two VolumeTag spellings and an AlternateVolumeTag).
const realMtx = `  Storage Changer /dev/sg3:2 Drives, 5 Slots ( 1 Import/Export )
Data Transfer Element 0:Full (Storage Element 3 Loaded):VolumeTag = CFR003L8                        
Data Transfer Element 1:Empty
      Storage Element 1:Full :VolumeTag=CFR001L8                        
      Storage Element 2:Empty
      Storage Element 3:Empty
      Storage Element 4:Full :VolumeTag=CLN001L1                        
      Storage Element 5 IMPORT/EXPORT:Full :VolumeTag=CFR009L8  :AlternateVolumeTag=X
`

func TestParseMtxStatus(t *testing.T) {
	st, err := ParseMtxStatus(realMtx)
	if err != nil {
		t.Fatal(err)
	}
	want := &ChangerStatus{
		Drives: []DriveElement{{Index: 0, Full: true, SourceSlot: 3, VolumeTag: "CFR003L8"}, {Index: 1}},
		Slots: []SlotElement{{Number: 1, Full: true, VolumeTag: "CFR001L8"}, {Number: 2}, {Number: 3},
			{Number: 4, Full: true, VolumeTag: "CLN001L1"}, {Number: 5, Full: true, ImportExport: true, VolumeTag: "CFR009L8"}},
	}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("parsed\n%+v\nwant\n%+v", st, want)
	}
	// What the VTL writes parses back to the same elements.
	again, err := ParseMtxStatus(FormatMtxStatus("/dev/sg3", st))
	if err != nil || !reflect.DeepEqual(again, st) {
		t.Fatalf("format then parse: %+v, %v", again, err)
	}
}

func TestParseMtxStatusRefusesBadLines(t *testing.T) {
	for _, bad := range []string{
		"",
		"mtx: cannot open SCSI device '/dev/sg3' - No such file or directory\n",
		"Data Transfer Element X:Empty\n",
		"      Storage Element 2:Half\n",
		"      Storage Element 0:Empty\n",
		"Data Transfer Element 0 Full\n",
	} {
		if st, err := ParseMtxStatus(bad); err == nil {
			t.Errorf("%q parsed as %+v", bad, st)
		}
	}
}

func FuzzParseMtxStatus(f *testing.F) {
	f.Add(realMtx)
	f.Add("Data Transfer Element 0:Full (Unknown Storage Element Loaded):VolumeTag = A\n")
	f.Fuzz(func(t *testing.T, text string) {
		st, err := ParseMtxStatus(text)
		if err != nil {
			return
		}
		// Whatever parses formats and parses back to itself.
		again, err := ParseMtxStatus(FormatMtxStatus("x", st))
		if err != nil {
			t.Fatalf("formatted status does not parse: %v", err)
		}
		if len(again.Drives) != len(st.Drives) || len(again.Slots) != len(st.Slots) {
			t.Fatalf("round trip changed the elements")
		}
		for i := range st.Drives {
			if !strings.Contains(text, "Data Transfer Element") || again.Drives[i].Full != st.Drives[i].Full {
				t.Fatalf("drive %d changed", i)
			}
		}
	})
}
