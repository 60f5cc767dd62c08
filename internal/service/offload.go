package service

import (
	"fmt"
	"log/slog"

	"github.com/coffer-backup/coffer/internal/config"

	"github.com/coffer-backup/coffer/internal/restore"
)

// The storage primitives coffer offloads, with a fallback where the
// target cannot (VAAI's block zero, full copy, atomic test-and-set): each
// use says in its task's log and in the metrics which path it took, so
// an operator sees what passed through the host.

// reportZeroing says how a restored disk's zero bytes were made: offloaded
// (holes of a sparse file, the device's zeroing) or written as zeros.
func (s *Service) reportZeroing(t Task, disk string, st restore.Stats) {
	if st.ZeroOffloaded == 0 && st.ZeroWritten == 0 {
		return
	}
	t.Log(slog.LevelInfo, fmt.Sprintf("disk %s: zeros %s offloaded (holes, or the device's zeroing), %s written as zeros",
		disk, config.HumanBytes(st.ZeroOffloaded), config.HumanBytes(st.ZeroWritten)),
		"primitive", "zero", "offloaded_bytes", st.ZeroOffloaded, "fallback_bytes", st.ZeroWritten)
	if m := s.cfg.Metrics; m != nil {
		m.AddOffload("zero", "offloaded", st.ZeroOffloaded)
		m.AddOffload("zero", "fallback", st.ZeroWritten)
	}
}
