package mediatest_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/media/mediatest"
	"github.com/coffer-backup/coffer/internal/media/st"
)

// TestRealDevice runs the suite against real hardware, by hand:
//
//	COFFER_MEDIA_DRIVE=/dev/nst0 COFFER_MEDIA_CHANGER=/dev/sg1 \
//	COFFER_MEDIA_DRIVE_INDEX=0 COFFER_MEDIA_SCRATCH=7,8 [COFFER_MEDIA_FILL=1] \
//	go test ./internal/media/mediatest -run TestRealDevice -v -timeout 0
//
// It overwrites the cartridges of the two scratch slots. Where no tape
// hardware is attached (CI) it is skipped: the VTL runs the same suite.
func TestRealDevice(t *testing.T) {
	dev, chg := os.Getenv("COFFER_MEDIA_DRIVE"), os.Getenv("COFFER_MEDIA_CHANGER")
	if dev == "" || chg == "" {
		t.Skip("COFFER_MEDIA_DRIVE and COFFER_MEDIA_CHANGER name no real drive and changer")
	}
	idx, err := strconv.Atoi(os.Getenv("COFFER_MEDIA_DRIVE_INDEX"))
	if err != nil {
		t.Fatal("COFFER_MEDIA_DRIVE_INDEX: the changer's number of the drive (mtx's Data Transfer Element)")
	}
	var scratch [2]int
	parts := strings.Split(os.Getenv("COFFER_MEDIA_SCRATCH"), ",")
	if len(parts) != 2 {
		t.Fatal("COFFER_MEDIA_SCRATCH: two slots with cartridges the suite may overwrite, like 7,8")
	}
	for i, p := range parts {
		if scratch[i], err = strconv.Atoi(strings.TrimSpace(p)); err != nil {
			t.Fatal(err)
		}
	}
	drive := st.Open(dev)
	defer drive.Close()
	lib := &st.Library{Changer: &st.Changer{Device: chg}, Drives: map[int]*st.Drive{idx: drive}}
	mediatest.Run(t, mediatest.Setup{Changer: lib, Drive: drive, DriveIndex: idx, Scratch: scratch,
		Fill: os.Getenv("COFFER_MEDIA_FILL") == "1"})
}
