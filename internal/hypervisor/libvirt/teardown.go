package libvirt

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// NativeConfig is what a libvirt restore needs to define the domain again.
type NativeConfig struct {
	// DomainXML is the domain's persistent definition at the snapshot.
	DomainXML string `json:"domain_xml"`
	URI       string `json:"uri"`
}

// Config implements hypervisor.Session.
func (s *session) Config() hypervisor.VMConfig {
	cfg := hypervisor.VMConfig{Kind: "libvirt", Name: s.dom.Name, UUID: formatUUID(s.dom.UUID), CPUs: s.x.VCPU,
		MemoryMiB: s.x.memoryMiB(), Firmware: s.x.OS.Loader}
	for _, d := range s.disks {
		cfg.Disks = append(cfg.Disks, d.DiskInfo)
	}
	for _, n := range s.x.Devices.Interfaces {
		net := n.Source.Network
		if net == "" {
			net = n.Source.Bridge
		}
		cfg.NICs = append(cfg.NICs, hypervisor.NICConfig{Key: n.Alias.Name, Network: net, MAC: n.MAC.Address, Model: n.Model.Type})
	}
	cfg.Native, _ = json.Marshal(NativeConfig{DomainXML: s.inactive, URI: s.c.cfg.URI})
	return cfg
}

// Disks implements hypervisor.Session.
func (s *session) Disks() []hypervisor.DiskSnapshot {
	var out []hypervisor.DiskSnapshot
	for _, d := range s.disks {
		out = append(out, hypervisor.DiskSnapshot{DiskInfo: d.DiskInfo, Kind: hypervisor.KindDisk, Changes: d.changes,
			ChangeWarning: d.warning, NewToken: d.token})
	}
	return out
}

// Warnings implements hypervisor.Session.
func (s *session) Warnings() []string { return s.warnings }

// AchievedMode implements hypervisor.Session.
func (s *session) AchievedMode() hypervisor.SnapshotMode { return s.achieved }

// Release implements hypervisor.Session. The pull job costs the domain
// only copy-before-write into the scratch files: nothing to drop early;
// a domain held still for a storage snapshot is resumed and thawed.
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
	if s.isOffline() {
		return s.openOffline(ctx, key)
	}
	for _, d := range s.disks {
		if d.Key == key {
			return openReader(ctx, s.j.Socket, d, s.c.cfg.Connections)
		}
	}
	return nil, fmt.Errorf("%w: disk %s", hypervisor.ErrNotFound, key)
}

// Close implements hypervisor.Session: the backup job ends (libvirt
// removes its scratch files), and change tracking settles. On success the
// chain's superseded checkpoints are deleted; on failure the new one is,
// which libvirt merges into its parent, so the next backup still covers
// everything this one would have covered.
func (s *session) Close(ctx context.Context, ok bool) (map[string]string, error) {
	if s.closed {
		return s.tokens, nil
	}
	s.closed = true
	defer s.unlock()
	s.stopOffline() // unlocks the images: first, so a domain that starts meanwhile only waits for this
	if s.j == nil {
		return nil, nil
	}
	var errs []error
	if s.unhold != nil { // held and never released
		errs = append(errs, s.Release(ctx))
	}
	if ok && s.j.Checkpoint != "" {
		// The point holding the new checkpoint's token is committed: a
		// crash from here on must keep it.
		s.j.Keep = true
		if err := s.j.save(); err != nil {
			return nil, err
		}
		crashPoint("committed")
	}
	if err := s.c.endJob(ctx, s.lv, s.dom, &s.j.journalState); err != nil {
		errs = append(errs, err)
	}
	if ok && s.j.Checkpoint != "" {
		errs = append(errs, s.pruneChain(ctx))
	}
	if !ok && s.j.Checkpoint != "" {
		errs = append(errs, s.c.deleteCheckpoint(ctx, s.lv, s.dom, s.j.Checkpoint))
		if s.j.Offline != nil { // bitmaps added before their metadata was defined
			errs = append(errs, s.c.removeOfflineBitmaps(ctx, s.lv, s.dom, s.j.Offline.Images, s.j.Checkpoint))
		}
	}
	if err := errors.Join(errs...); err != nil {
		err = errors.Join(err, s.j.save())
		return nil, fmt.Errorf("libvirt: release snapshot of %s (will be retried by cleanup): %w", s.dom.Name, err)
	}
	if err := s.j.remove(); err != nil {
		return nil, err
	}
	if ok {
		s.tokens = map[string]string{}
		for _, d := range s.disks {
			if d.token != "" {
				s.tokens[d.Key] = d.token
			}
		}
	}
	return s.tokens, nil
}

// pruneChain deletes the chain's checkpoints the new one supersedes: a new
// full keeps only itself, an incremental keeps itself and the chain's full
// anchor (the base of its differentials). Other chains' checkpoints are
// deleted only when their chain has gone unused for the connector's
// ChainExpiry; foreign ones are never touched.
func (s *session) pruneChain(ctx context.Context) error {
	cps, err := s.c.checkpoints(ctx, s.lv, s.dom)
	if err != nil {
		return err
	}
	newFull := isFull(s.j.Checkpoint, s.req.Chain)
	var drop []string
	for name := range cps {
		if name == s.j.Checkpoint || !strings.HasPrefix(name, chainPrefix(s.req.Chain)) {
			continue
		}
		if !newFull && isFull(name, s.req.Chain) {
			continue
		}
		drop = append(drop, name)
	}
	expired := s.c.chainExpiry().Expired(chainMarks(cps), hypervisor.ChainLabel(s.req.Chain))
	if len(expired) > 0 {
		s.c.log.Info("removing the checkpoints of backup chains unused for longer than the expiry", "vm", s.dom.Name, "checkpoints", expired)
	}
	var errs []error
	for _, name := range append(drop, expired...) {
		errs = append(errs, s.c.deleteCheckpoint(ctx, s.lv, s.dom, name))
	}
	return errors.Join(errs...)
}

// endJob ends the journalled backup job if it is still running (aborting
// a pull job is how it ends) and removes the job's files. The job is
// aborted only when it exports on the journal's socket: libvirt runs one
// backup job per domain, and another one is somebody else's.
func (c *Connector) endJob(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain, j *journalState) error {
	var errs []error
	if j.Suspended { // first: a paused guest's agent cannot thaw (a held, quiesced session)
		errs = append(errs, c.resume(ctx, lv, dom))
	}
	if j.Frozen {
		errs = append(errs, do(context.WithoutCancel(ctx), c.cfg.CallTimeout, "thaw the guest filesystems of "+dom.Name, func() error {
			_, err := lv.DomainFsthaw(dom, nil, 0)
			return err
		}))
	}
	if j.Job {
		doc, err := call(ctx, c.cfg.CallTimeout, "backup job of "+dom.Name, func() (string, error) {
			return lv.DomainBackupGetXMLDesc(dom, 0)
		})
		switch {
		case isLibvirtError(err, golibvirt.ErrNoDomainBackup):
		case err != nil:
			errs = append(errs, err)
		case jobSocket(doc) == j.Socket:
			err := do(ctx, c.cfg.CallTimeout, "end the backup job of "+dom.Name, func() error { return lv.DomainAbortJob(dom) })
			if err != nil && !isLibvirtError(err, golibvirt.ErrOperationInvalid) { // ended meanwhile
				errs = append(errs, err)
			} else {
				errs = append(errs, c.waitJobGone(ctx, lv, dom, j.Socket))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	j.Frozen, j.Suspended, j.Job = false, false, false
	// libvirt removes the scratch files of a job it ended; these remain
	// when the job never started or the domain died with it.
	for _, f := range append(j.Scratch, j.Socket) {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// jobSocket is the NBD socket of a running backup job's XML.
func jobSocket(doc string) string {
	var x struct {
		Server struct {
			Socket string `xml:"socket,attr"`
		} `xml:"server"`
	}
	if xml.Unmarshal([]byte(doc), &x) != nil {
		return ""
	}
	return x.Server.Socket
}

// waitJobGone waits until the backup job exporting on socket has ended:
// libvirt's abort only cancels the job's block jobs, and the job (its
// scratch files, its hold on the checkpoint bitmaps) goes when QEMU
// reports them cancelled.
func (c *Connector) waitJobGone(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain, socket string) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	for {
		doc, err := call(ctx, c.cfg.CallTimeout, "backup job of "+dom.Name, func() (string, error) {
			return lv.DomainBackupGetXMLDesc(dom, 0)
		})
		if isLibvirtError(err, golibvirt.ErrNoDomainBackup) || err == nil && jobSocket(doc) != socket {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: libvirt: the aborted backup job of %s did not end within %s", hypervisor.ErrTransient, dom.Name, c.cfg.CallTimeout)
		case <-time.After(50 * time.Millisecond): // polling interval: libvirt has no call that waits for it
		}
	}
}
