package instant

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore/nbdexport"
)

// Domains runs recovered VMs as domains of a hypervisor manager
// (libvirt) instead of QEMU processes coffer starts: the manager defines
// the VM from its recorded definition on overlays backed by coffer's
// server, commits it with its own live copy, and removes it.
type Domains interface {
	// InstantSocket is where the session's server must listen for the
	// manager's VMs to reach it.
	InstantSocket(id string) string
	InstantStart(ctx context.Context, cfg hypervisor.VMConfig, o hypervisor.InstantOptions) (hypervisor.InstantVM, error)
	InstantCommit(ctx context.Context, vm hypervisor.InstantVM, target, format string) (map[string]string, error)
	InstantDiscard(ctx context.Context, vm hypervisor.InstantVM) error
	InstantRunning(ctx context.Context, ref hypervisor.VMRef) (bool, error)
}

// DomainOptions are Start's for a domain.
type DomainOptions struct {
	Domains    Domains
	Connection string // the connection's name, recorded in the session
	Name       string // the new domain's name; "" = VM-instant
	Datastore  string // where the overlays go; "" = as recorded
}

// IsDomain says whether the session's VM is a hypervisor manager's domain.
func (s *Session) IsDomain() bool { return s.Connection != "" && s.Platform == "" }

// domainVM is the session's domain as the manager knows it.
func (s *Session) domainVM() hypervisor.InstantVM {
	vm := hypervisor.InstantVM{Ref: hypervisor.VMRef{ID: s.DomainID, Name: s.Domain}, Overlays: map[string]string{}}
	for _, d := range s.Disks {
		vm.Overlays[d.Key] = d.Overlay
	}
	return vm
}

// startDomain is Start for a point of a managed VM.
func startDomain(ctx context.Context, r *repo.Repository, snap *repo.Point, cfg hypervisor.VMConfig, o StartOptions) (*Session, func() error, error) {
	d := o.Domain
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
	name := d.Name
	if name == "" {
		name = cfg.Name + "-instant"
	}
	s := &Session{ID: id, Snapshot: snap.ID.String(), Repository: r.Config().ID, VM: cfg.Name, Dir: dir,
		NBDSocket: d.Domains.InstantSocket(id), State: StateRunning, Started: time.Now().UTC(), ServerPID: os.Getpid(),
		Connection: d.Connection, Domain: name}
	l, err := nbdexport.Listen("unix", s.NBDSocket)
	if err != nil {
		return nil, nil, err
	}
	srv := &Server{l: l, exports: exports, names: names, log: o.Log}
	// The domain's QEMU opens the overlays' backing files when it starts.
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	stop := func(err error) (*Session, func() error, error) {
		_ = srv.Close() // stopping on an error returned below
		<-served
		_ = os.Remove(s.NBDSocket)
		return nil, nil, err
	}
	sizes := map[string]int64{}
	for _, disk := range snap.Disks {
		sizes[disk.Key] = disk.Size
	}
	vm, err := d.Domains.InstantStart(ctx, cfg, hypervisor.InstantOptions{Name: name, Datastore: d.Datastore, Socket: s.NBDSocket,
		Sizes: sizes, ReconnectDelay: o.ReconnectDelay})
	if err != nil {
		return stop(err)
	}
	s.DomainID = vm.Ref.ID
	for _, disk := range snap.Disks {
		s.Disks = append(s.Disks, SessionDisk{Key: disk.Key, Size: disk.Size, Overlay: vm.Overlays[disk.Key]})
	}
	if err := s.Save(); err != nil {
		return stop(errors.Join(err, d.Domains.InstantDiscard(context.WithoutCancel(ctx), vm)))
	}
	ok = true
	return s, func() error { return <-served }, nil
}

// CommitDomain moves a session's domain onto local files with the
// manager's live copy (target: a storage pool or a directory) and stops
// serving the backup. On failure the domain keeps running from the
// backup and the commit can be run again.
func CommitDomain(ctx context.Context, s *Session, d Domains, target, format string) error {
	if s.State == StateCommitted {
		return fmt.Errorf("session %s is already committed to %v", s.ID, s.Targets)
	}
	if running, err := d.InstantRunning(ctx, s.domainVM().Ref); err != nil {
		return err
	} else if !running {
		return fmt.Errorf("session %s: the recovered domain %s is not running; discard the session", s.ID, s.Domain)
	}
	s.State = StateCommitting
	if err := s.Save(); err != nil {
		return err
	}
	targets, err := d.InstantCommit(ctx, s.domainVM(), target, format)
	if err != nil {
		s.State = StateRunning
		return errors.Join(err, s.Save())
	}
	s.State, s.Targets = StateCommitted, nil
	for _, disk := range s.Disks {
		s.Targets = append(s.Targets, targets[disk.Key])
	}
	if err := s.Save(); err != nil {
		return err
	}
	stopServer(s)
	return nil
}

// DiscardDomain ends a session of a domain: one still running from the
// backup is stopped and undefined and its overlays deleted; a committed
// one is left alone and only the session goes.
func DiscardDomain(ctx context.Context, s *Session, d Domains) error {
	if s.State != StateCommitted {
		if err := d.InstantDiscard(ctx, s.domainVM()); err != nil {
			return fmt.Errorf("remove the recovered domain: %w", err)
		}
	}
	stopServer(s)
	return os.RemoveAll(s.Dir)
}

// DomainRunning says whether the session's domain runs (or is paused).
func DomainRunning(ctx context.Context, s *Session, d Domains) (bool, error) {
	return d.InstantRunning(ctx, s.domainVM().Ref)
}
