package libvirt

import (
	"context"
	"fmt"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

var _ hypervisor.IOStatser = (*session)(nil)

// DiskIO implements hypervisor.IOStatser with libvirt's block statistics
// of each disk of the session (virDomainBlockStatsFlags, `virsh
// domblkstat`): QEMU's block accounting of the guest's requests, read and
// write counts and their summed times in nanoseconds, which include what
// copy-before-write adds while the backup job's fleecing sits under the
// disk. A shut-off domain does no I/O: its disks count none.
func (s *session) DiskIO(ctx context.Context) ([]hypervisor.DiskIO, error) {
	out := make([]hypervisor.DiskIO, 0, len(s.disks))
	for _, d := range s.disks {
		if s.isOffline() {
			out = append(out, hypervisor.DiskIO{Key: d.Key})
			continue
		}
		io, err := s.c.blockStats(ctx, s.lv, s.dom, d.Key)
		if err != nil {
			return nil, err
		}
		out = append(out, io)
	}
	return out, nil
}

// blockStats reads one disk's counters. libvirt's RPC answers a call for
// no parameter with how many it has, then a call for that many with them.
func (c *Connector) blockStats(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain, key string) (hypervisor.DiskIO, error) {
	params, err := call(ctx, c.cfg.CallTimeout, "block statistics of "+key+" of "+dom.Name, func() ([]golibvirt.TypedParam, error) {
		_, n, err := lv.DomainBlockStatsFlags(dom, key, 0, 0)
		if err != nil {
			return nil, err
		}
		p, _, err := lv.DomainBlockStatsFlags(dom, key, n, 0)
		return p, err
	})
	if err != nil {
		return hypervisor.DiskIO{}, err
	}
	v := map[string]int64{}
	for _, p := range params {
		if n, ok := p.Value.I.(int64); ok {
			v[p.Field] = n
		}
	}
	for _, f := range []string{"rd_operations", "wr_operations", "rd_total_times", "wr_total_times"} {
		if _, ok := v[f]; !ok {
			return hypervisor.DiskIO{}, fmt.Errorf("libvirt: block statistics of %s of %s have no %s", key, dom.Name, f)
		}
	}
	return hypervisor.DiskIO{Key: key, Ops: uint64(v["rd_operations"] + v["wr_operations"]),
		Time: time.Duration(v["rd_total_times"] + v["wr_total_times"])}, nil
}
