package qemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/qmp"
)

const (
	bitmapPrefix = "coffer-"
	// cbwTimeout bounds how long a guest write may wait for its
	// copy-before-write; past it the snapshot breaks, not the guest.
	cbwTimeoutSeconds = 30
)

var defaultTimeouts = hypervisor.Timeouts{
	SnapshotCreate: time.Minute, SnapshotRemove: 2 * time.Minute, Quiesce: 20 * time.Second, Setup: time.Minute,
}

type session struct {
	c        *Connector
	cl       *qmp.Client
	release  func()
	j        *journal
	info     *vmInfo
	req      hypervisor.SnapshotRequest
	t        hypervisor.Timeouts
	nbdNet   string // "unix", or "tcp" for a storage daemon's own server
	nbdSock  string
	warnings []string
	achieved hypervisor.SnapshotMode // what the snapshot instant really did
	closed   bool
	tokens   map[string]string
	// unhold resumes and thaws a VM held still for a storage snapshot
	// (SnapshotRequest.Hold); nil once released or when not held.
	unhold func() error
}

// parseToken splits a change token "bitmap@size".
func parseToken(tok string) (name string, size int64, ok bool) {
	name, s, found := strings.Cut(tok, "@")
	if !found || !strings.HasPrefix(name, bitmapPrefix) {
		return "", 0, false
	}
	size, err := strconv.ParseInt(s, 10, 64)
	return name, size, err == nil
}

// Snapshot implements hypervisor.Connector.
func (c *Connector) Snapshot(ctx context.Context, ref hypervisor.VMRef, req hypervisor.SnapshotRequest) (_ hypervisor.Session, err error) {
	sock, err := c.lookup(ctx, ref)
	if err != nil {
		return nil, err
	}
	cl, release, err := c.monitor(ctx, sock)
	if err != nil {
		return nil, err
	}
	s := &session{c: c, cl: cl, release: release, req: req, t: mergeTimeouts(req.Timeouts), nbdNet: "unix"}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.t.SnapshotRemove)
			if _, cerr := s.Close(cctx, false); cerr != nil {
				c.log.Warn("undoing a failed snapshot", "vm", ref.Name, "err", cerr)
			}
			cancel()
		}
	}()
	if s.info, err = queryVM(ctx, cl, sock); err != nil {
		return nil, err
	}
	if ref.ID != "" && ref.ID != s.info.id() && ref.ID != sock {
		c.mu.Lock()
		delete(c.seen, ref.ID) // the next lookup takes an inventory
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: socket %s now serves VM %s, not %s", hypervisor.ErrNotFound, sock, s.info.id(), ref.ID)
	}
	if req.Hold && (s.info.Daemon || req.Mode == hypervisor.WithMemory) {
		return nil, fmt.Errorf("%w: %s cannot be held still for a storage snapshot (a qemu-storage-daemon has no CPU to stop, and with-memory saves through fleecing): "+
			"use group: vm, or snapshot: crash-consistent or quiesced", hypervisor.ErrUnsupported, s.info.Name)
	}
	if s.info.Daemon && req.Mode == hypervisor.WithMemory {
		return nil, fmt.Errorf("%w: %s is a qemu-storage-daemon: no memory to save", hypervisor.ErrUnsupported, s.info.Name)
	}
	sum := sha256.Sum256([]byte(req.SessionID + time.Now().String()))
	tag := hex.EncodeToString(sum[:4])
	s.j = &journal{path: filepath.Join(journalDir(c.cfg.StateDir), tag+".json"), journalState: journalState{
		Socket: sock, VMID: s.info.id(), VMName: s.info.Name, SessionID: req.SessionID, Created: time.Now(), PID: os.Getpid(),
		Daemon: s.info.Daemon,
	}}
	s.nbdSock = filepath.Join(c.cfg.StateDir, "fleece", tag+".nbd")
	for _, d := range s.info.Disks {
		jd := s.planDisk(d, tag)
		if s.info.Daemon {
			planDaemonDisk(&jd)
		}
		s.j.Disks = append(s.j.Disks, jd)
	}
	if err := s.j.save(); err != nil {
		return nil, fmt.Errorf("qemu: journal: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, s.t.SnapshotCreate)
	defer cancel()
	if s.info.Daemon {
		if err := s.snapshotDaemon(sctx); err != nil {
			return nil, err
		}
	} else {
		if !s.memoryFirst() { // else inside the stopped window, see freezeAndSwitch
			if err := s.prepareFleecing(sctx); err != nil {
				return nil, err
			}
		}
		if err := s.freezeAndSwitch(sctx); err != nil {
			return nil, err
		}
	}
	if err := s.export(sctx); err != nil {
		return nil, err
	}
	return s, nil
}

func mergeTimeouts(t hypervisor.Timeouts) hypervisor.Timeouts {
	if t.SnapshotCreate == 0 {
		t.SnapshotCreate = defaultTimeouts.SnapshotCreate
	}
	if t.SnapshotRemove == 0 {
		t.SnapshotRemove = defaultTimeouts.SnapshotRemove
	}
	if t.Quiesce == 0 {
		t.Quiesce = defaultTimeouts.Quiesce
	}
	if t.Setup == 0 {
		t.Setup = defaultTimeouts.Setup
	}
	return t
}

// planDisk decides names and the change-tracking hand-over for one disk.
func (s *session) planDisk(d blockDisk, tag string) journalDisk {
	short := safeName(d.ID)
	if len(short) > 12 {
		h := sha256.Sum256([]byte(d.ID))
		short = hex.EncodeToString(h[:4])
	}
	base := "coffer-" + tag + "-" + short
	jd := journalDisk{ID: d.ID, Node: d.Node, QdevPath: d.QdevPath, Size: d.Size, Changes: "full",
		FleeceNode: base + "-fl", CBWNode: base + "-cbw", SnapNode: base + "-snap", Export: base,
		FleeceFile: filepath.Join(s.c.cfg.StateDir, "fleece", base+".qcow2")}
	if s.noFleecing() {
		jd.FleeceNode, jd.CBWNode, jd.SnapNode, jd.FleeceFile = "", "", "", ""
	}
	old := ""
	if tok, ok := s.req.Since[d.ID]; ok {
		name, size, valid := parseToken(tok)
		bm, present := d.bitmap(name)
		switch {
		case !valid:
			jd.Warning = "change token not understood; reading the whole disk"
		case size != d.Size:
			jd.Warning = fmt.Sprintf("disk resized from %d to %d bytes since the last backup; reading the whole disk", size, d.Size)
		case !present:
			jd.Warning = fmt.Sprintf("dirty bitmap %s is missing (QEMU restarted without a clean shutdown, the chain went unused past its expiry, or a raw disk); reading the whole disk", name)
		case bm.Inconsistent:
			jd.Warning = fmt.Sprintf("dirty bitmap %s is inconsistent (QEMU or the host crashed); reading the whole disk", name)
		default:
			old = name
		}
	} else if len(s.req.Since) > 0 {
		jd.Warning = "no change token for this disk (added since the last backup, or its change tracking failed the last backup's check); reading the whole disk"
	}
	if jd.Warning != "" {
		s.warnings = append(s.warnings, d.ID+": "+jd.Warning)
	}
	// The bitmap named by Since keeps recording; a frozen copy of it
	// (TempBitmap) describes this point's changes. A failed backup then
	// only has to drop what it added to be rolled back.
	if old != "" {
		jd.OldBitmap, jd.TempBitmap, jd.Changes = old, "coffer-"+tag+"-frozen", "incremental"
	}
	switch {
	case old != "" && s.req.Differential:
		jd.Changes, jd.Token = "differential", s.req.Since[d.ID]
	case s.req.Track || old != "":
		// A full starts a new anchor that differentials diff against.
		jd.NewBitmap = newBitmapName(s.req.Chain, old == "", tag, time.Now())
		jd.Token = fmt.Sprintf("%s@%d", jd.NewBitmap, d.Size)
	}
	return jd
}

// noFleecing: as-is reads the live disk; a held VM's disks are read from
// the storage snapshot taken while it is stopped.
func (s *session) noFleecing() bool { return s.req.Mode == hypervisor.AsIs || s.req.Hold }

func (s *session) prepareFleecing(ctx context.Context) error {
	if s.noFleecing() {
		return nil
	}
	for _, d := range s.j.Disks {
		// Sparse, exactly the disk's size: copy-before-write does not check
		// the size, and a short target would break the snapshot.
		out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", d.FleeceFile, strconv.FormatInt(d.Size, 10)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("qemu: create fleecing image: %v: %s", err, out)
		}
		if err := s.cl.Execute(ctx, "blockdev-add", map[string]any{
			"driver": "qcow2", "node-name": d.FleeceNode, "discard": "unmap",
			"file": map[string]any{"driver": "file", "filename": d.FleeceFile},
		}, nil); err != nil {
			return err
		}
		if err := s.cl.Execute(ctx, "blockdev-add", map[string]any{
			"driver": "copy-before-write", "node-name": d.CBWNode, "file": d.Node, "target": d.FleeceNode,
			"on-cbw-error": "break-snapshot", "cbw-timeout": cbwTimeoutSeconds,
		}, nil); err != nil {
			return err
		}
	}
	return nil
}

// freezeAndSwitch is the snapshot instant: guest filesystems frozen when
// asked, the VM stopped (all I/O drained), every disk switched to its
// copy-before-write filter, bitmaps handed over, then resumed and thawed.
// The VM is never left stopped or frozen, whatever fails.
func (s *session) freezeAndSwitch(ctx context.Context) (err error) {
	// A failed snapshot returns no session: the achieved mode is only
	// ever read after the whole instant succeeded.
	s.achieved = s.plainMode()
	if s.req.Hold {
		return s.hold(ctx)
	}
	if s.req.Mode == hypervisor.Quiesced {
		thaw, frozen, err := s.quiesce(ctx)
		if err != nil {
			return err
		}
		defer thaw()
		if frozen {
			s.achieved = hypervisor.Quiesced
		}
	}
	running := s.info.Status == "running"
	if !running {
		s.notRunning()
	}
	if s.req.Mode != hypervisor.AsIs && running {
		if s.req.Mode == hypervisor.Suspend {
			s.achieved = hypervisor.Suspend // the VM is paused for the switch below
		}
		s.j.Stopped = true
		if err := s.j.save(); err != nil {
			return err
		}
		if err := s.cl.Execute(ctx, "stop", nil, nil); err != nil {
			return err
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if cerr := s.cl.Execute(cctx, "cont", nil, nil); cerr != nil {
				err = errors.Join(err, fmt.Errorf("resume VM: %w", cerr))
				return
			}
			s.j.Stopped = false
			err = errors.Join(err, s.j.save())
		}()
	}
	if s.memoryFirst() {
		// Saving memory inactivates the block nodes, which QEMU 7.2 refuses
		// while a copy-before-write filter exists: bitmaps are handed over
		// and memory saved first, then the fleecing is built and switched
		// to, all in the same stopped window.
		if err := s.handOverBitmaps(ctx); err != nil {
			return err
		}
		if err := s.saveMemory(ctx); err != nil {
			return err
		}
		s.achieved = hypervisor.WithMemory
		if err := s.prepareFleecing(ctx); err != nil {
			return err
		}
		return s.switchDisks(ctx)
	}
	if err := s.switchDisks(ctx); err != nil {
		return err
	}
	return s.handOverBitmaps(ctx)
}

// plainMode is what a snapshot achieves before any guest or VM action:
// as-is when asked, else crash-consistent (all disks at one instant).
func (s *session) plainMode() hypervisor.SnapshotMode {
	if s.req.Mode == hypervisor.AsIs && !s.req.Hold {
		return hypervisor.AsIs
	}
	return hypervisor.CrashConsistent
}

// notRunning warns when the mode needs a running VM that is not: a paused
// or shut-down guest has no memory worth saving (QEMU saves none) and
// nothing for coffer to pause.
func (s *session) notRunning() {
	switch s.req.Mode {
	case hypervisor.WithMemory:
		s.warnings = append(s.warnings, fmt.Sprintf("VM is %s, not running: no memory state saved; the backup is crash-consistent", s.info.Status))
	case hypervisor.Suspend:
		s.warnings = append(s.warnings, fmt.Sprintf("VM is %s, not running: coffer did not pause it; the backup is crash-consistent", s.info.Status))
	}
}

// memoryFirst reports whether this session saves the VM's memory.
func (s *session) memoryFirst() bool {
	return s.req.Mode == hypervisor.WithMemory && s.info.Status == "running"
}

// switchDisks points every disk's device at its copy-before-write filter.
func (s *session) switchDisks(ctx context.Context) error {
	if s.noFleecing() {
		return nil
	}
	for i := range s.j.Disks {
		d := &s.j.Disks[i]
		d.Switched = true
		if err := s.j.save(); err != nil {
			return err
		}
		if err := s.cl.Execute(ctx, "qom-set", map[string]any{"path": d.QdevPath, "property": "drive", "value": d.CBWNode}, nil); err != nil {
			return fmt.Errorf("switch %s to its snapshot filter: %w", d.ID, err)
		}
	}
	return nil
}

func (s *session) handOverBitmaps(ctx context.Context) error {
	actions := s.bitmapActions()
	if len(actions) == 0 {
		return nil
	}
	return s.cl.Execute(ctx, "transaction", map[string]any{"actions": actions}, nil)
}

// bitmapActions are the transaction actions of the bitmap hand-over.
func (s *session) bitmapActions() []map[string]any {
	var actions []map[string]any
	act := func(typ string, data map[string]any) {
		actions = append(actions, map[string]any{"type": typ, "data": data})
	}
	for _, d := range s.j.Disks {
		for _, b := range s.diskBitmaps(d.ID) {
			if b.Inconsistent && strings.HasPrefix(b.Name, bitmapPrefix) {
				act("block-dirty-bitmap-remove", map[string]any{"node": d.Node, "name": b.Name})
			}
		}
		if d.NewBitmap != "" {
			act("block-dirty-bitmap-add", map[string]any{"node": d.Node, "name": d.NewBitmap, "persistent": s.persistent(d.ID)})
		}
		if d.TempBitmap != "" {
			act("block-dirty-bitmap-add", map[string]any{"node": d.Node, "name": d.TempBitmap, "disabled": true})
			act("block-dirty-bitmap-merge", map[string]any{"node": d.Node, "target": d.TempBitmap, "bitmaps": []string{d.OldBitmap}})
		}
	}
	return actions
}

func (s *session) diskBitmaps(id string) []bitmapInfo {
	for _, d := range s.info.Disks {
		if d.ID == id {
			return d.Bitmaps
		}
	}
	return nil
}

// persistent bitmaps survive a clean QEMU restart; raw images cannot hold
// them, so raw disks track changes only while QEMU runs.
func (s *session) persistent(id string) bool {
	for _, d := range s.info.Disks {
		if d.ID == id {
			return d.Format == "qcow2"
		}
	}
	return false
}

// quiesce freezes the guest filesystems through the guest agent and
// returns the thaw, and whether the guest is frozen: with the fallback
// policy a missing or failing agent is a warning and frozen is false.
func (s *session) quiesce(ctx context.Context) (thaw func(), frozen bool, err error) {
	fallback := func(why error) (func(), bool, error) {
		if s.req.Quiesce == hypervisor.QuiesceRequired {
			return nil, false, fmt.Errorf("%w: %v", hypervisor.ErrQuiesceFailed, why)
		}
		s.warnings = append(s.warnings, fmt.Sprintf("guest agent did not quiesce (%v); the backup is crash-consistent", why))
		return func() {}, false, nil
	}
	qctx, cancel := context.WithTimeout(ctx, s.t.Quiesce)
	defer cancel()
	ga, err := qmp.DialGuestAgent(qctx, guestAgentPath(s.info.Socket))
	if err != nil {
		return fallback(err)
	}
	s.j.Frozen = true
	if err := s.j.save(); err != nil {
		_ = ga.Close()
		return nil, false, err
	}
	if _, err := ga.Freeze(qctx); err != nil {
		_ = thawAgent(ctx, ga, s.t.Quiesce) // the freeze failed: thaw in case it half happened
		_ = ga.Close()
		s.j.Frozen = false
		_ = s.j.save() // a stale Frozen only makes cleanup thaw again
		return fallback(err)
	}
	return func() {
		_ = thawAgent(ctx, ga, s.t.Quiesce) // best effort: the run goes on either way
		_ = ga.Close()
		s.j.Frozen = false
		_ = s.j.save() // a stale Frozen only makes cleanup thaw again
	}, true, nil
}

// thawAgent thaws with a fresh deadline: a thaw must be attempted even
// when the caller's context is done.
func thawAgent(ctx context.Context, ga *qmp.GuestAgent, d time.Duration) error {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	_, err := ga.Thaw(tctx)
	return err
}
