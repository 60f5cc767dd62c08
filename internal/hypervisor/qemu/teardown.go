package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/statefile"
)

// Config implements hypervisor.Session.
func (s *session) Config() hypervisor.VMConfig {
	cfg := hypervisor.VMConfig{Kind: "qemu", Name: s.info.Name, UUID: s.info.UUID, CPUs: s.info.CPUs, MemoryMiB: s.info.MemoryMiB}
	for _, d := range s.info.Disks {
		cfg.Disks = append(cfg.Disks, d.info())
	}
	native, _ := json.Marshal(nativeConfig{CmdLine: s.info.CmdLine, Disks: s.info.Disks})
	cfg.Native = native
	return cfg
}

// nativeConfig is what a QEMU restore needs to reproduce the VM.
type nativeConfig struct {
	CmdLine []string    `json:"cmdline"`
	Disks   []blockDisk `json:"disks"`
}

// Disks implements hypervisor.Session.
func (s *session) Disks() []hypervisor.DiskSnapshot {
	var out []hypervisor.DiskSnapshot
	for i, d := range s.j.Disks {
		out = append(out, hypervisor.DiskSnapshot{
			DiskInfo: s.info.Disks[i].info(), Kind: hypervisor.KindDisk, Changes: d.Changes,
			ChangeWarning: d.Warning, NewToken: d.Token,
		})
	}
	if m, ok := s.memorySnapshot(); ok {
		out = append(out, m)
	}
	return out
}

// Warnings implements hypervisor.Session.
func (s *session) Warnings() []string { return s.warnings }

// AchievedMode implements hypervisor.Session.
func (s *session) AchievedMode() hypervisor.SnapshotMode { return s.achieved }

// Release implements hypervisor.Session. Fleecing costs the VM nothing
// beyond copy-before-write, so there is nothing to drop early; a VM held
// still for a storage snapshot is resumed and thawed.
func (s *session) Release(ctx context.Context) error {
	if s.unhold == nil {
		return nil
	}
	err := s.unhold()
	s.unhold = nil
	return err
}

// OpenDisk implements hypervisor.Session.
func (s *session) OpenDisk(ctx context.Context, key string) (hypervisor.DiskReader, error) {
	if key == memoryKey && s.j.MemoryFile != "" {
		return openMemory(s.j.MemoryFile)
	}
	for _, d := range s.j.Disks {
		if d.ID == key {
			return openReader(ctx, s.nbdNet, s.nbdSock, d, s.c.cfg.Connections)
		}
	}
	return nil, fmt.Errorf("%w: disk %s", hypervisor.ErrNotFound, key)
}

// Close implements hypervisor.Session.
func (s *session) Close(ctx context.Context, ok bool) (map[string]string, error) {
	if s.closed {
		return s.tokens, nil
	}
	s.closed = true
	defer s.release()
	if s.j == nil {
		return nil, nil
	}
	// A held VM is resumed through its own guest agent connection first
	// (the agent's channel takes one client at a time).
	rerr := s.Release(ctx)
	err := teardown(ctx, s.cl, &s.j.journalState, ok, s.c.chainExpiry()) // retries what Release could not
	if err != nil {
		err = errors.Join(rerr, err, s.j.save())
		return nil, fmt.Errorf("qemu: release snapshot of %s (will be retried by cleanup): %w", s.info.Name, err)
	}
	if rerr := s.j.remove(); rerr != nil {
		return nil, rerr
	}
	if ok {
		s.tokens = map[string]string{}
		for _, d := range s.j.Disks {
			if d.Token != "" {
				s.tokens[d.ID] = d.Token
			}
		}
	}
	return s.tokens, nil
}

// teardown undoes everything a journal lists, tolerating objects that are
// already gone, and settles change tracking: on success superseded bitmaps
// are dropped (and those of chains unused past expiry); on failure the new
// one is, as if this backup had not run.
func teardown(ctx context.Context, cl *qmp.Client, j *journalState, ok bool, expiry hypervisor.ChainExpiry) error {
	var errs []error
	gone := func(err error) bool {
		return err == nil || qmp.IsClass(err, "DeviceNotFound") || isNotFound(err)
	}
	try := func(what string, err error) {
		if !gone(err) {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	// Resume before thawing: the guest agent of a stopped VM cannot answer,
	// so a thaw first would only wait for its timeout.
	dropMemory(ctx, cl, j)
	if j.Stopped {
		try("resume VM", cl.Execute(ctx, "cont", nil, nil))
		j.Stopped = false
	}
	if j.Frozen {
		gctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		if ga, err := qmp.DialGuestAgent(gctx, guestAgentPath(j.Socket)); err == nil {
			if thawAgent(ctx, ga, 20*time.Second) == nil {
				j.Frozen = false
			}
			_ = ga.Close()
		}
		cancel()
	}
	exports := map[string]bool{}
	var list []struct {
		ID string `json:"id"`
	}
	if cl.Execute(ctx, "query-block-exports", nil, &list) == nil {
		for _, e := range list {
			exports[e.ID] = true
		}
	}
	sub := cl.Subscribe()
	defer sub.Cancel()
	for _, d := range j.Disks {
		if d.Export != "" && exports[d.Export] {
			if err := cl.Execute(ctx, "block-export-del", map[string]any{"id": d.Export, "mode": "hard"}, nil); gone(err) {
				// Deletion is asynchronous: the snapshot node and the bitmap
				// stay busy until this event.
				if _, werr := sub.Wait(ctx, "BLOCK_EXPORT_DELETED", qmp.FieldIs("id", d.Export)); werr != nil {
					errs = append(errs, werr)
				}
			} else {
				try("delete export", err)
			}
		}
	}
	if j.NBDServer != "" {
		try("stop NBD server", ignoreClass(cl.Execute(ctx, "nbd-server-stop", nil, nil), "GenericError"))
		_ = os.Remove(j.NBDServer) // the stopped server's socket
		j.NBDServer = ""
	}
	for i := range j.Disks {
		d := &j.Disks[i]
		if d.SnapNode != "" {
			try("delete snapshot node", cl.Execute(ctx, "blockdev-del", map[string]any{"node-name": d.SnapNode}, nil))
		}
		if d.Switched {
			err := cl.Execute(ctx, "qom-set", map[string]any{"path": d.QdevPath, "property": "drive", "value": d.Node}, nil)
			try("switch "+d.ID+" back", err)
			if err == nil {
				d.Switched = false
			}
		}
		if d.Job != "" {
			// The job owns its filter (CBWNode) and holds the overlay.
			try("cancel fleecing job "+d.Job, cancelBackupJob(ctx, cl, d.Job))
		} else if d.CBWNode != "" {
			try("delete copy-before-write node", cl.Execute(ctx, "blockdev-del", map[string]any{"node-name": d.CBWNode}, nil))
		}
		if d.FleeceNode != "" {
			try("delete fleecing node", cl.Execute(ctx, "blockdev-del", map[string]any{"node-name": d.FleeceNode}, nil))
		}
		if d.FleeceFile != "" {
			if err := os.Remove(d.FleeceFile); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
		}
		try("settle dirty bitmaps of "+d.ID, settleBitmaps(ctx, cl, j.Daemon, d, ok, expiry))
	}
	return errors.Join(errs...)
}

func settleBitmaps(ctx context.Context, cl *qmp.Client, daemon bool, d *journalDisk, ok bool, expiry hypervisor.ChainExpiry) error {
	cur, err := currentDisk(ctx, cl, daemon, d.Node)
	if err != nil {
		return err
	}
	if cur == nil {
		return nil // the disk was unplugged; its bitmaps went with it
	}
	has := func(n string) bool { _, found := cur.bitmap(n); return n != "" && found }
	var actions []map[string]any
	act := func(typ string, data map[string]any) {
		actions = append(actions, map[string]any{"type": typ, "data": data})
	}
	if has(d.TempBitmap) {
		act("block-dirty-bitmap-remove", map[string]any{"node": d.Node, "name": d.TempBitmap})
	}
	if ok && d.NewBitmap != "" {
		var others []bitmapInfo
		for _, b := range cur.Bitmaps {
			if b.Name != d.TempBitmap {
				others = append(others, b)
			}
		}
		for _, name := range supersededBitmaps(others, d.NewBitmap, d.OldBitmap, expiry) {
			act("block-dirty-bitmap-remove", map[string]any{"node": d.Node, "name": name})
		}
	}
	if !ok && has(d.NewBitmap) {
		// The Since bitmap never stopped recording: dropping the new one
		// is the whole rollback.
		act("block-dirty-bitmap-remove", map[string]any{"node": d.Node, "name": d.NewBitmap})
	}
	if len(actions) == 0 {
		return nil
	}
	return cl.Execute(ctx, "transaction", map[string]any{"actions": actions}, nil)
}

// currentDisk is the disk on node now, nil if it is gone.
func currentDisk(ctx context.Context, cl *qmp.Client, daemon bool, node string) (*blockDisk, error) {
	if daemon {
		return daemonDisk(ctx, cl, node)
	}
	disks, err := queryDisks(ctx, cl)
	if err != nil {
		return nil, err
	}
	for i := range disks {
		if disks[i].Node == node {
			return &disks[i], nil
		}
	}
	return nil, nil
}

func isNotFound(err error) bool {
	var e *qmp.Error
	if !errors.As(err, &e) {
		return false
	}
	for _, sub := range []string{"not found", "Cannot find", "Failed to find", "No such", "does not exist"} {
		if strings.Contains(e.Desc, sub) {
			return true
		}
	}
	return false
}

func ignoreClass(err error, class string) error {
	if qmp.IsClass(err, class) {
		return nil
	}
	return err
}

// CleanupLeftovers implements hypervisor.Connector: it replays the
// journals of sessions whose coffer process is gone.
func (c *Connector) CleanupLeftovers(ctx context.Context) ([]hypervisor.Leftover, error) {
	js, err := loadJournals(c.cfg.StateDir)
	if err != nil {
		return nil, err
	}
	var out []hypervisor.Leftover
	var errs []error
	for _, j := range js {
		if j.PID != os.Getpid() && statefile.ProcessAlive(j.PID) {
			continue // another live coffer owns it
		}
		if j.PID == os.Getpid() {
			continue // a session of this process: its Close handles it
		}
		ref := hypervisor.VMRef{ID: j.VMID, Name: j.VMName}
		if _, err := os.Stat(j.Socket); err != nil {
			for _, d := range j.Disks {
				_ = os.Remove(d.FleeceFile) // best effort: the VM is gone
			}
			if err := j.remove(); err != nil {
				errs = append(errs, err)
			}
			out = append(out, hypervisor.Leftover{VM: ref, Kind: "journal", Name: j.SessionID, Action: "VM gone; journal dropped"})
			continue
		}
		cl, release, err := c.monitor(ctx, j.Socket)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, describeLeftovers(ref, &j.journalState)...)
		err = teardown(ctx, cl, &j.journalState, false, hypervisor.ChainExpiry{})
		release()
		if err != nil {
			errs = append(errs, fmt.Errorf("cleanup of %s: %w", j.VMName, errors.Join(err, j.save())))
			continue
		}
		if err := j.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

func describeLeftovers(ref hypervisor.VMRef, j *journalState) []hypervisor.Leftover {
	var out []hypervisor.Leftover
	if j.Frozen {
		out = append(out, hypervisor.Leftover{VM: ref, Kind: "guest-freeze", Name: "fsfreeze", Action: "thawed"})
	}
	if j.Stopped {
		out = append(out, hypervisor.Leftover{VM: ref, Kind: "vm-state", Name: "stopped", Action: "resumed"})
	}
	for _, d := range j.Disks {
		for kind, name := range map[string]string{"export": d.Export, "block-node": d.CBWNode, "overlay-file": d.FleeceFile, "block-job": d.Job} {
			if name != "" {
				out = append(out, hypervisor.Leftover{VM: ref, Kind: kind, Name: name, Action: "removed"})
			}
		}
		if d.NewBitmap != "" {
			out = append(out, hypervisor.Leftover{VM: ref, Kind: "bitmap", Name: d.NewBitmap, Action: "merged back"})
		}
	}
	return out
}
