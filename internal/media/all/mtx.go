package all

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/media/st"
	"github.com/coffer-backup/coffer/internal/media/volume"
)

// openMtx opens a real library: its changer, driven through mtx, and n
// of its drives from l.Drive on, in the changer's numbering (a drive the
// configuration does not list is skipped: a library's drives need not be
// numbered without gaps). Every drive of the library is known to the
// changer, so that one is ejected before the robot moves its cartridge,
// whichever operation loaded it. The changer is locked for the operation
// (st.Changer.Lock), as a virtual library is; no drive is opened: st
// opens one at its first operation, and the changer's status needs none.
func (l Library) openMtx(n int) (libs []*volume.Library, close func() error, err error) {
	if l.Name == "" && n > 1 {
		return nil, nil, invalidf("library %s names one drive device (mtx:CHANGER:DEVICE): --drives %d needs a library of the configuration "+
			"listing its drives (kind: mtx, drives: [{number: 0, device: /dev/nst0}, ...]), or one copy per drive", l.Ref(), n)
	}
	numbers := slices.Sorted(maps.Keys(l.Devices))
	if _, ok := l.Devices[l.Drive]; !ok {
		return nil, nil, invalidf("media library %s has no drive %d: its drives are %s (the configuration's drives of the library)",
			l.Ref(), l.Drive, driveList(numbers))
	}
	ch := &st.Changer{Device: l.Changer}
	unlock, err := ch.Lock()
	if err != nil {
		return nil, nil, busy(l, err)
	}
	sl := &st.Library{Changer: ch, Drives: map[int]*st.Drive{}}
	for num, dev := range l.Devices {
		sl.Drives[num] = st.Open(dev)
	}
	from := slices.Index(numbers, l.Drive)
	if len(numbers)-from < n {
		_ = unlock() // nothing was done under the lock
		return nil, nil, invalidf("%d drives from drive %d: media library %s has %d (drives %s)", n, l.Drive, l.Ref(), len(numbers)-from,
			driveList(numbers[from:]))
	}
	for _, num := range numbers[from : from+n] {
		libs = append(libs, &volume.Library{Changer: sl, Drive: sl.Drives[num], DriveIndex: num})
	}
	return libs, func() error {
		var errs []error
		for _, num := range numbers {
			errs = append(errs, sl.Drives[num].Close())
		}
		return errors.Join(append(errs, unlock())...)
	}, nil
}

func driveList(numbers []int) string {
	s := make([]string, len(numbers))
	for i, n := range numbers {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

// mtxWarnings says what of a real library's spec this server lacks: mtx,
// the changer's device, a drive's device.
func mtxWarnings(spec map[string]any) []string {
	var out []string
	if _, err := exec.LookPath("mtx"); err != nil {
		out = append(out, "mtx is not installed on this server (the mtx package): the changer cannot be driven from here")
	}
	if dev, _ := spec["changer"].(string); dev != "" {
		if _, err := os.Stat(dev); err != nil {
			out = append(out, fmt.Sprintf("changer: %v: this server has no such device (`lsscsi -g` lists the changer's /dev/sgN)", err))
		}
	}
	drives, _ := spec["drives"].([]any)
	for _, d := range drives {
		m, _ := d.(map[string]any)
		if dev, _ := m["device"].(string); dev != "" {
			if _, err := os.Stat(dev); err != nil {
				out = append(out, fmt.Sprintf("drive %v: %v: this server has no such device (is the st driver loaded? `lsscsi -g` lists tape drives)",
					m["number"], err))
			}
		}
	}
	return out
}
