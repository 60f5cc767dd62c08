package libvirt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// crashPoint is called at the steps where a killed coffer leaves something
// behind; the crash tests kill the process there. It does nothing in
// production.
var crashPoint = func(step string) {}

// exportBitmap is the name under which a pull backup exports each
// incremental disk's changes (meta context qemu:dirty-bitmap:<name>).
const exportBitmap = "coffer-changes"

var defaultTimeouts = hypervisor.Timeouts{
	SnapshotCreate: time.Minute, SnapshotRemove: 2 * time.Minute, Quiesce: 20 * time.Second, Setup: time.Minute,
}

type session struct {
	c        *Connector
	lv       *golibvirt.Libvirt
	dom      golibvirt.Domain
	unlock   func()
	j        *journal
	x        *domainXML
	inactive string // the domain's persistent definition, for restore
	req      hypervisor.SnapshotRequest
	t        hypervisor.Timeouts
	disks    []sessionDisk
	warnings []string
	achieved hypervisor.SnapshotMode
	paused   bool // the domain was paused before coffer came
	// offline: the domain is shut off, and its disks are read from their
	// images (offline.go); shutoff is why it stopped.
	offline map[string]*offlineDisk
	shutoff golibvirt.DomainShutoffReason
	// unhold resumes and thaws a domain held still for a storage
	// snapshot (SnapshotRequest.Hold); nil once released or when not held.
	unhold func() error
	closed bool
	tokens map[string]string
}

// sessionDisk is one disk of a session and how it is read.
type sessionDisk struct {
	hypervisor.DiskInfo
	since   string // checkpoint of an incremental or differential read
	changes string // "full", "incremental", "differential"
	warning string
	token   string // the change token this point hands to the next one
	scratch string
}

// Snapshot implements hypervisor.Connector: one pull-mode backup job that
// freezes all disks at one instant and exports them over NBD, creating the
// chain's new checkpoint at the same instant.
func (c *Connector) Snapshot(ctx context.Context, ref hypervisor.VMRef, req hypervisor.SnapshotRequest) (_ hypervisor.Session, err error) {
	if req.Mode == hypervisor.WithMemory {
		return nil, fmt.Errorf("%w: libvirt's backup API saves no memory state, and libvirt's memory snapshots rewrite the disk chain; use crash-consistent, quiesced or suspend", hypervisor.ErrUnsupported)
	}
	if req.Mode == hypervisor.AsIs {
		return nil, fmt.Errorf("%w: as-is (storage-level) snapshots are not available through libvirt", hypervisor.ErrUnsupported)
	}
	if err := c.elsewhere(); err != nil {
		return nil, err
	}
	lv, err := c.client(ctx)
	if err != nil {
		return nil, err
	}
	dom, err := c.lookup(ctx, lv, ref)
	if err != nil {
		return nil, err
	}
	s := &session{c: c, lv: lv, dom: dom, req: req, t: mergeTimeouts(req.Timeouts), achieved: hypervisor.CrashConsistent}
	s.unlock = c.lockDomain(formatUUID(dom.UUID))
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.t.SnapshotRemove)
			if _, cerr := s.Close(cctx, false); cerr != nil {
				c.log.Warn("undoing a failed snapshot", "vm", dom.Name, "err", cerr)
			}
			cancel()
		}
	}()
	if err := s.describe(ctx); err != nil {
		return nil, err
	}
	if err := s.plan(ctx); err != nil {
		return nil, err
	}
	if err := s.j.save(); err != nil {
		return nil, fmt.Errorf("libvirt: journal: %w", err)
	}
	crashPoint("journalled")
	sctx, cancel := context.WithTimeout(ctx, s.t.SnapshotCreate)
	defer cancel()
	begin := s.begin
	if s.isOffline() {
		begin = s.beginOffline
	}
	if err := begin(sctx); err != nil {
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

// describe reads the domain's state and definitions.
func (s *session) describe(ctx context.Context) error {
	var reason int32
	st, err := call(ctx, s.c.cfg.CallTimeout, "state of domain "+s.dom.Name, func() (int32, error) {
		st, r, err := s.lv.DomainGetState(s.dom, 0)
		reason = r
		return st, err
	})
	if err != nil {
		return err
	}
	switch state := stateName(st); {
	case golibvirt.DomainState(st) == golibvirt.DomainShutoff:
		// Read from its images (offline.go). A domain shutting down
		// (DomainShutdown) still has its QEMU and is refused below.
		s.offline, s.shutoff = map[string]*offlineDisk{}, golibvirt.DomainShutoffReason(reason)
	case state != "running" && state != "paused":
		return fmt.Errorf("%w: domain %s is %s: libvirt's backup API needs a running (or paused) domain, and coffer reads only a shut-off one from its images",
			hypervisor.ErrUnsupported, s.dom.Name, state)
	}
	s.paused = stateName(st) == "paused"
	live, err := call(ctx, s.c.cfg.CallTimeout, "describe domain "+s.dom.Name, func() (string, error) {
		return s.lv.DomainGetXMLDesc(s.dom, 0)
	})
	if err != nil {
		return err
	}
	if s.x, err = parseDomain(live); err != nil {
		return err
	}
	// The persistent definition is what a restore defines again; a
	// transient domain has none, its live XML serves.
	s.inactive, err = call(ctx, s.c.cfg.CallTimeout, "definition of domain "+s.dom.Name, func() (string, error) {
		return s.lv.DomainGetXMLDesc(s.dom, golibvirt.DomainXMLInactive)
	})
	if err != nil {
		s.inactive = live
	}
	return nil
}

// isOffline: the domain is shut off (offline.go).
func (s *session) isOffline() bool { return s.offline != nil }

// plan decides, per disk, between a full and a changes-only read, names the
// new checkpoint, and writes the journal's first version.
func (s *session) plan(ctx context.Context) error {
	cps, err := s.c.checkpoints(ctx, s.lv, s.dom)
	if err != nil {
		return err
	}
	var pools []pool
	if pools, err = s.c.pools(ctx, s.lv); err != nil {
		return err
	}
	tag := make([]byte, 4)
	rand.Read(tag)
	unique := strconv.FormatInt(time.Now().Unix(), 36) + hex.EncodeToString(tag)
	s.j = &journal{path: filepath.Join(journalDir(s.c.cfg.StateDir), unique+".json"), journalState: journalState{
		URI: s.c.cfg.URI, DomainUUID: formatUUID(s.dom.UUID), DomainName: s.dom.Name, SessionID: s.req.SessionID,
		Created: time.Now(), PID: os.Getpid(), Socket: filepath.Join(s.c.cfg.StateDir, "sockets", unique+".nbd"),
	}}
	incremental := false
	for _, dx := range s.x.Devices.Disks {
		if !dx.backedUp() {
			continue
		}
		info, err := s.c.diskInfo(ctx, s.lv, s.dom, dx, pools)
		if err != nil {
			return err
		}
		d := sessionDisk{DiskInfo: info, changes: "full", scratch: filepath.Join(s.c.cfg.StateDir, "sockets", unique+"-"+info.Key+".scratch")}
		d.since, d.warning = s.base(info, cps)
		if d.warning != "" {
			s.warnings = append(s.warnings, info.Key+": "+d.warning)
		}
		if d.since != "" {
			d.changes = "incremental"
			incremental = true
			if s.req.Differential {
				d.changes, d.token = "differential", s.req.Since[info.Key]
			}
		}
		s.j.Scratch = append(s.j.Scratch, d.scratch)
		s.disks = append(s.disks, d)
	}
	if len(s.disks) == 0 {
		return fmt.Errorf("%w: domain %s has no disk to back up", hypervisor.ErrUnsupported, s.dom.Name)
	}
	// A differential keeps the chain where it is: its base (the full's
	// checkpoint) keeps recording, and no new checkpoint is needed.
	if s.req.Differential && incremental {
		return nil
	}
	if !s.req.Track && !incremental {
		return nil
	}
	kind := "full-"
	if incremental {
		kind = "inc-"
	}
	s.j.Checkpoint = chainPrefix(s.req.Chain) + kind + unique
	for i := range s.disks {
		if d := &s.disks[i]; d.Format == "qcow2" && d.token == "" {
			d.token = token(s.j.Checkpoint, d.Size)
		}
	}
	return nil
}

// base is the checkpoint a disk's changes are read against, or why the
// disk is read in full.
func (s *session) base(d hypervisor.DiskInfo, cps map[string]checkpoint) (string, string) {
	tok, ok := s.req.Since[d.Key]
	if !ok {
		if len(s.req.Since) > 0 {
			return "", "no change tracking for this disk yet (added since the last backup); reading the whole disk"
		}
		return "", ""
	}
	name, size, valid := parseToken(tok)
	cp, present := cps[name]
	disks := cp.disks
	switch {
	case !valid:
		return "", "change token not understood; reading the whole disk"
	case size != d.Size:
		return "", fmt.Sprintf("disk resized from %d to %d bytes since the last backup; reading the whole disk", size, d.Size)
	case !present:
		return "", fmt.Sprintf("checkpoint %s is gone (deleted, expired after its chain went unused, or the domain was redefined); reading the whole disk", name)
	case !disks[d.Key]:
		return "", fmt.Sprintf("checkpoint %s does not track this disk; reading the whole disk", name)
	}
	return name, ""
}

// backupXML is the pull-mode backup job: every disk exported under its
// target name on the session's unix socket, changes against each disk's
// own base checkpoint.
func (s *session) backupXML() string {
	type scratch struct {
		File string `xml:"file,attr"`
	}
	type disk struct {
		Name         string  `xml:"name,attr"`
		Backup       string  `xml:"backup,attr"`
		Type         string  `xml:"type,attr"`
		Mode         string  `xml:"backupmode,attr"`
		Incremental  string  `xml:"incremental,attr,omitempty"`
		ExportName   string  `xml:"exportname,attr"`
		ExportBitmap string  `xml:"exportbitmap,attr,omitempty"`
		Scratch      scratch `xml:"scratch"`
	}
	type server struct {
		Transport string `xml:"transport,attr"`
		Socket    string `xml:"socket,attr"`
	}
	type backup struct {
		XMLName xml.Name `xml:"domainbackup"`
		Mode    string   `xml:"mode,attr"`
		Server  server   `xml:"server"`
		Disks   []disk   `xml:"disks>disk"`
	}
	b := backup{Mode: "pull", Server: server{Transport: "unix", Socket: s.j.Socket}}
	for _, d := range s.disks {
		x := disk{Name: d.Key, Backup: "yes", Type: "file", Mode: "full", ExportName: d.Key, Scratch: scratch{File: d.scratch}}
		if d.since != "" {
			x.Mode, x.Incremental, x.ExportBitmap = "incremental", d.since, exportBitmap
		}
		b.Disks = append(b.Disks, x)
	}
	out, _ := xml.Marshal(b)
	return string(out)
}

// checkpointXML is the new checkpoint: a bitmap on every qcow2 disk (raw
// images cannot hold one).
func (s *session) checkpointXML() string {
	x := checkpointXML{Name: s.j.Checkpoint, Description: "coffer backup chain " + s.req.Chain + ", session " + s.req.SessionID}
	for _, d := range s.disks {
		mode := "no"
		if d.Format == "qcow2" {
			mode = "bitmap"
		}
		x.Disks = append(x.Disks, struct {
			Name       string `xml:"name,attr"`
			Checkpoint string `xml:"checkpoint,attr"`
		}{d.Key, mode})
	}
	out, _ := xml.Marshal(x)
	return string(out)
}

// begin is the snapshot instant: the guest frozen or the domain paused when
// asked, then the backup job started. Thaw and resume are guaranteed,
// whatever fails; a held session (SnapshotRequest.Hold) keeps the domain
// paused, and frozen when quiesced, until Release, since a pull job leaves
// the disk files changing while the storage snapshot is taken.
func (s *session) begin(ctx context.Context) (err error) {
	held := s.req.Hold && !s.paused
	var undo []func() error // thaw, then resume: run last first
	defer func() {
		unwind := func() error {
			var errs []error
			for i := len(undo) - 1; i >= 0; i-- { // resume before thaw: a paused guest cannot thaw
				errs = append(errs, undo[i]())
			}
			return errors.Join(errs...)
		}
		if err != nil || !held {
			err = errors.Join(err, unwind())
			return
		}
		s.unhold = unwind
	}()
	if s.req.Mode == hypervisor.Quiesced {
		thaw, frozen, err := s.quiesce(ctx)
		if err != nil {
			return err
		}
		undo = append(undo, thaw)
		if frozen {
			s.achieved = hypervisor.Quiesced
		}
	}
	if s.req.Mode == hypervisor.Suspend && s.paused {
		s.warnings = append(s.warnings, "domain is paused, not running: coffer did not pause it; the backup is crash-consistent")
	}
	if (s.req.Mode == hypervisor.Suspend || held) && !s.paused {
		resume, err := s.suspend(ctx)
		if err != nil {
			return err
		}
		undo = append(undo, resume)
		if s.req.Mode == hypervisor.Suspend {
			s.achieved = hypervisor.Suspend
		}
	}
	s.j.Job = true
	if err := s.j.save(); err != nil {
		return err
	}
	var cp golibvirt.OptString
	if s.j.Checkpoint != "" {
		cp = golibvirt.OptString{s.checkpointXML()}
	}
	xmlDoc := s.backupXML()
	if err := do(ctx, s.t.SnapshotCreate, "start the backup job of "+s.dom.Name, func() error {
		return s.lv.DomainBackupBegin(s.dom, xmlDoc, cp, 0)
	}); err != nil {
		return err
	}
	crashPoint("begun") // frozen or paused still, when asked
	return nil
}
