package service

import (
	"fmt"
	"log/slog"

	"github.com/coffer-backup/coffer/internal/config"

	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/transfer"
)

// The storage primitives coffer offloads, with a fallback where the
// target cannot (VAAI's block zero, full copy, atomic test-and-set): each
// use says in its task's log and in the metrics which path it took, so
// an operator sees what passed through the host.

// ReportZeroing says how a restored disk's zero bytes were made: offloaded
// (holes of a sparse file, the device's zeroing) or written as zeros.
func (s *Service) ReportZeroing(t Job, disk string, st restore.Stats) {
	if st.ZeroOffloaded == 0 && st.ZeroWritten == 0 {
		return
	}
	t.Log(slog.LevelInfo, fmt.Sprintf("disk %s: zeros %s offloaded (holes, or the device's zeroing), %s written as zeros",
		disk, config.HumanBytes(st.ZeroOffloaded), config.HumanBytes(st.ZeroWritten)),
		"primitive", "zero", "offloaded_bytes", st.ZeroOffloaded, "fallback_bytes", st.ZeroWritten)
	if m := s.Config.Metrics; m != nil {
		m.AddOffload("zero", "offloaded", st.ZeroOffloaded)
		m.AddOffload("zero", "fallback", st.ZeroWritten)
	}
}

// ReportPackCopy says how a copy between repositories moved its data:
// whole packs the storage copied (cloned, or copied server-side by S3),
// and chunks streamed through coffer (read from the source, written to
// the target's packs).
func (s *Service) ReportPackCopy(t Job, res *transfer.Result) {
	o := res.Offload
	streamed := res.BytesWritten - o.BytesAdopted
	how := map[store.CopyMethod]string{
		store.CopyCloned:      "cloned by the filesystem (shared extents, nothing through the host)",
		store.CopyServerSide:  "copied server-side by the S3 service (nothing through the host)",
		store.CopyKernel:      "copied by the kernel (copy_file_range: the filesystem cannot clone them)",
		store.CopyThroughHost: "copied through coffer (another filesystem)",
	}[store.CopyMethod(o.Method)]
	msg := fmt.Sprintf("copy: %d whole pack(s), %s, %s; %d chunk(s), %s, streamed through coffer",
		o.PacksAdopted, config.HumanBytes(o.BytesAdopted), how, res.ChunksWritten-o.ChunksAdopted, config.HumanBytes(streamed))
	if o.PacksAdopted == 0 {
		msg = fmt.Sprintf("copy: %d chunk(s), %s, streamed through coffer", res.ChunksWritten, config.HumanBytes(streamed))
	}
	if o.Unavailable != "" {
		msg += " (no pack copied whole: " + o.Unavailable + ")"
	} else if o.PacksPartial > 0 {
		msg += fmt.Sprintf(" (%d source pack(s) only partly needed)", o.PacksPartial)
	}
	t.Log(slog.LevelInfo, msg, "primitive", "copy", "method", o.Method, "adopted_packs", o.PacksAdopted,
		"adopted_bytes", o.BytesAdopted, "streamed_bytes", streamed, "partial_packs", o.PacksPartial)
	if m := s.Config.Metrics; m != nil {
		path := "fallback"
		if store.CopyMethod(o.Method).Offloaded() {
			path = "offloaded"
		}
		m.AddOffload("copy", path, o.BytesAdopted)
		m.AddOffload("copy", "fallback", streamed)
	}
}

// ReportTestAndSet says how the maintenance lease (the one lock that
// must be atomic: two garbage collections never run at once) is taken on
// this store: by the storage's own atomic condition, or emulated.
func (s *Service) ReportTestAndSet(t Job, st store.Store) {
	p := st.Properties()
	path, how := "offloaded", "link(2) under flock, atomic in the filesystem"
	switch {
	case p.Remote && p.ConditionalWrites:
		how = "S3 conditional writes (If-None-Match, If-Match on the lease's ETag), atomic in the service"
	case p.Remote:
		path, how = "fallback", "emulated (HEAD, PUT, HEAD): the S3 server ignores conditional writes"
	}
	t.Log(slog.LevelInfo, "maintenance lease: test-and-set by "+how, "primitive", "test-and-set", "path", path)
	if m := s.Config.Metrics; m != nil {
		m.AddOffloadOp("test-and-set", path)
	}
}
