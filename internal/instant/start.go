package instant

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/nbd"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore/nbdexport"
)

// StartOptions adjust Start.
type StartOptions struct {
	StateDir string
	// ReconnectDelay is how long the VM's reads wait for a lost NBD server
	// before the VM pauses (it resumes when `coffer instant serve` is back).
	ReconnectDelay time.Duration
	Log            *slog.Logger
	// Domain runs a libvirt point's VM as a new domain of a connection.
	Domain *DomainOptions
	// VSphere runs a vSphere point's VM on an ESXi host of a connection.
	VSphere *VSphereOptions
}

// Server serves a session's disks; it runs in the process that started
// (or re-serves) the session, for as long as the VM reads from the backup.
type Server struct {
	l       net.Listener
	exports map[string]nbd.Export
	names   []string
	log     *slog.Logger
}

// Serve answers the VM's reads until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	return nbdexport.Serve(ctx, s.l, s.exports, s.names, s.log)
}

// Close stops listening (Serve returns).
func (s *Server) Close() error { return s.l.Close() }

// Start begins an instant recovery of snapshot snap: its disks are served
// over NBD on a unix socket, one qcow2 overlay per disk takes the VM's
// writes, and QEMU is started from the command line recorded at backup
// time. The VM runs as soon as this returns; the server goes on until ctx
// ends (wait returns then), for as long as the VM reads from the backup.
func Start(ctx context.Context, r *repo.Repository, snap *repo.Point, o StartOptions) (*Session, func() error, error) {
	var cfg hypervisor.VMConfig
	err := json.Unmarshal(snap.VMConfig, &cfg)
	if err == nil && cfg.Kind == "libvirt" {
		if o.Domain == nil || o.Domain.Domains == nil {
			return nil, nil, fmt.Errorf("%w: backup point %s is of a libvirt domain: name the connection to run it on", ErrNotQEMU, snap.ID.Short())
		}
		return startDomain(ctx, r, snap, cfg, o)
	}
	if err == nil && cfg.Kind == "vsphere" {
		if o.VSphere == nil || o.VSphere.VCenter == nil {
			return nil, nil, fmt.Errorf("%w: backup point %s is of a vSphere VM: name the vSphere connection to run it on", ErrNotQEMU, snap.ID.Short())
		}
		return startVSphere(ctx, r, snap, cfg, o)
	}
	if err != nil || cfg.Kind != "qemu" {
		return nil, nil, fmt.Errorf("%w: backup point %s was not taken from a QEMU VM: instant recovery needs its recorded configuration", ErrNotQEMU, snap.ID.Short())
	}
	id, dir, err := sessionDir(o.StateDir, snap)
	if err != nil {
		return nil, nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(dir) // best effort after the error returned
		}
	}()
	exports, names, err := nbdexport.Exports(ctx, r, snap)
	if err != nil {
		return nil, nil, err
	}
	s := &Session{ID: id, Snapshot: snap.ID.String(), Repository: r.Config().ID, VM: cfg.Name, Dir: dir,
		NBDSocket: filepath.Join(dir, "nbd.sock"), State: StateRunning, Started: time.Now().UTC(), ServerPID: os.Getpid()}
	l, err := nbdexport.Listen("unix", s.NBDSocket)
	if err != nil {
		return nil, nil, err
	}
	srv := &Server{l: l, exports: exports, names: names, log: o.Log}
	spec := qemu.LaunchSpec{Dir: dir, Name: cfg.Name, UUID: cfg.UUID, StopOnError: true, Disks: map[string]qemu.LaunchDisk{}}
	for _, d := range snap.Disks {
		overlay := filepath.Join(dir, d.Key+".overlay.qcow2")
		if err := qemu.CreateNBDOverlay(ctx, overlay, s.NBDSocket, d.Key, d.Size, o.ReconnectDelay); err != nil {
			l.Close()
			return nil, nil, err
		}
		spec.Disks[d.Key] = qemu.LaunchDisk{Path: overlay, Format: "qcow2"}
		s.Disks = append(s.Disks, SessionDisk{Key: d.Key, Size: d.Size, Overlay: overlay})
	}
	rl, err := qemu.RelaunchArgs(cfg.Native, spec)
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	for i := range s.Disks {
		s.Disks[i].Nodes = rl.Nodes[s.Disks[i].Key]
	}
	s.Warnings = rl.Warnings
	s.QMPSocket, s.Console = spec.QMPPath(), spec.ConsolePath()
	// QEMU opens the overlays' backing files at start, so the server
	// answers already while it launches, and goes on serving until ctx ends.
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	pid, err := qemu.Launch(ctx, rl.Args, spec)
	if err == nil {
		s.VMPID = pid
		if err = s.Save(); err != nil {
			_ = qemu.Quit(ctx, s.QMPSocket)
		}
	}
	if err != nil {
		_ = srv.Close() // stopping on the error returned
		<-served
		return nil, nil, err
	}
	ok = true
	return s, func() error { return <-served }, nil
}

// sessionDir makes the state directory of a new session of snap; a point
// that is being recovered already is refused.
func sessionDir(stateDir string, snap *repo.Point) (id, dir string, err error) {
	id = snap.ID.Short()
	dir = filepath.Join(Root(stateDir), id)
	if prev, err := Load(stateDir, id); err == nil {
		return "", "", fmt.Errorf("backup point %s is already recovered (session %s, %s): commit or discard it first", id, prev.ID, prev.State)
	}
	return id, dir, os.MkdirAll(dir, 0o700)
}

// Reserve serves a session again after its server died: the VM, paused
// or holding its reads, continues once the caller runs the server and
// calls Resume.
func Reserve(ctx context.Context, r *repo.Repository, s *Session, log *slog.Logger) (*Server, error) {
	if s.State != StateRunning {
		return nil, fmt.Errorf("session %s is %s: nothing to serve", s.ID, s.State)
	}
	if s.IsVSphere() {
		return nil, fmt.Errorf("session %s runs on vSphere from a datastore coffer no longer serves: discard it (the vSphere connection's cleanup at start removes it too)", s.ID)
	}
	if s.IsDomain() {
		// libvirt 9.0 gives QEMU's NBD client no reconnect delay, and
		// without one it never reconnects: the domain stays paused.
		return nil, fmt.Errorf("session %s runs as libvirt domain %s, which cannot read from a server started again: commit it while its server runs, or discard it", s.ID, s.Domain)
	}
	if s.ServerPID != os.Getpid() && s.ServerAlive() {
		return nil, fmt.Errorf("session %s is already served by process %d", s.ID, s.ServerPID)
	}
	snap, err := r.FindPoint(ctx, s.Snapshot)
	if err != nil {
		return nil, err
	}
	exports, names, err := nbdexport.Exports(ctx, r, snap)
	if err != nil {
		return nil, err
	}
	l, err := nbdexport.Listen("unix", s.NBDSocket)
	if err != nil {
		return nil, err
	}
	s.ServerPID = os.Getpid()
	if err := s.Save(); err != nil {
		l.Close()
		return nil, err
	}
	return &Server{l: l, exports: exports, names: names, log: log}, nil
}
