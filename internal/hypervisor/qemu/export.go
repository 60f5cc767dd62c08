package qemu

import (
	"context"
	"errors"
	"fmt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// export publishes every disk's point-in-time image read-only over NBD,
// with the bitmap of this point's changes for incrementals.
func (s *session) export(ctx context.Context) error {
	if err := s.startNBDServer(ctx); err != nil {
		return err
	}
	for i := range s.j.Disks {
		d := &s.j.Disks[i]
		node := d.SnapNode
		switch {
		case d.Job != "":
			node = d.FleeceNode // storage daemon: the overlay backed by the disk
		case node != "":
			if err := s.cl.Execute(ctx, "blockdev-add", map[string]any{"driver": "snapshot-access", "node-name": node, "file": d.CBWNode}, nil); err != nil {
				return err
			}
		default:
			node = d.Node // as-is: the live disk, read-only
		}
		args := map[string]any{"type": "nbd", "id": d.Export, "node-name": node, "name": d.Export, "writable": false}
		if bm := d.exportBitmap(); bm != "" {
			args["bitmaps"] = []map[string]any{{"node": d.Node, "name": bm}}
		}
		if err := s.cl.Execute(ctx, "block-export-add", args, nil); err != nil {
			return err
		}
	}
	return nil
}

// startNBDServer starts coffer's NBD server, or on a storage daemon that
// serves its disks over NBD, uses that server (QEMU runs one per process).
func (s *session) startNBDServer(ctx context.Context) error {
	if s.info.Daemon {
		network, addr, found, err := daemonNBDServer(s.info.CmdLine)
		if err != nil {
			return err
		}
		if found {
			s.nbdNet, s.nbdSock = network, addr
			return nil
		}
	}
	s.j.NBDServer = s.nbdSock
	if err := s.j.save(); err != nil {
		return err
	}
	err := s.cl.Execute(ctx, "nbd-server-start", map[string]any{
		"addr": map[string]any{"type": "unix", "data": map[string]any{"path": s.nbdSock}},
	}, nil)
	if err != nil {
		s.j.NBDServer = ""
		serr := s.j.save()
		return errors.Join(fmt.Errorf("%w: QEMU's NBD server is already in use by someone else (%v); coffer needs to start its own", hypervisor.ErrTransient, err), serr)
	}
	return nil
}

func (d *journalDisk) exportBitmap() string { return d.TempBitmap }
