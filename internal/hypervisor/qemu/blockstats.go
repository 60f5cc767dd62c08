package qemu

import (
	"context"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

var _ hypervisor.IOStatser = (*session)(nil)

// blockStats is one entry of query-blockstats: a guest device's block
// backend and the statistics QEMU's block accounting keeps of the guest's
// requests (block/accounting.c): counts and summed times of completed
// reads and writes, from the request's arrival in the block layer to its
// completion, so they include what copy-before-write adds while a
// backup's fleecing filter sits under the device.
type blockStats struct {
	Device string `json:"device"`
	Qdev   string `json:"qdev"`
	Stats  struct {
		RdOps  uint64 `json:"rd_operations"`
		WrOps  uint64 `json:"wr_operations"`
		RdTime uint64 `json:"rd_total_time_ns"`
		WrTime uint64 `json:"wr_total_time_ns"`
	} `json:"stats"`
}

// DiskIO implements hypervisor.IOStatser through the session's monitor
// (QEMU serves one client per monitor, so while a backup holds it this is
// the only way in). query-blockstats lists the block backends of guest
// devices only: the backup's own NBD exports are anonymous backends and
// are not counted. A qemu-storage-daemon has no guest devices, so it
// reports no disks.
func (s *session) DiskIO(ctx context.Context) ([]hypervisor.DiskIO, error) {
	var stats []blockStats
	if err := s.cl.Execute(ctx, "query-blockstats", map[string]any{"query-nodes": false}, &stats); err != nil {
		return nil, err
	}
	keys := map[string]bool{}
	for _, d := range s.info.Disks {
		keys[d.ID] = true
	}
	var out []hypervisor.DiskIO
	for _, b := range stats {
		id := deviceID(b.Device, b.Qdev)
		if !keys[id] {
			continue // a CD-ROM, an empty drive, a device added after the snapshot
		}
		out = append(out, hypervisor.DiskIO{Key: id, Ops: b.Stats.RdOps + b.Stats.WrOps,
			Time: time.Duration(b.Stats.RdTime + b.Stats.WrTime)})
	}
	return out, nil
}
