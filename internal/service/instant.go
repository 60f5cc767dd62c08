package service

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/instant"
	"github.com/coffer-backup/coffer/internal/restore/nbdexport"
	"github.com/coffer-backup/coffer/internal/task"
)

// Serving is something that serves a backup point's disks until its
// context ends: Wait returns then (or when serving fails), and the restore
// lease that keeps gc away from the point ends with it.
type Serving[T any] struct {
	Doc  T
	wait func() error
}

// Wait serves until the operation's context ends.
func (s *Serving[T]) Wait() error { return s.wait() }

// InstantStartInput is the point to run a VM from.
type InstantStartInput struct {
	Point string
	// ReconnectDelay is how long the VM's reads wait for a lost server
	// before the VM pauses.
	ReconnectDelay time.Duration
	// A libvirt domain's point runs as a new domain (Name, default
	// VM-instant) of Connection (default: the one it was taken through),
	// its overlays in pool Datastore (default: as recorded).
	Connection, Name, Datastore string
}

// InstantStart starts the VM of a QEMU backup point running straight from
// the default repository: its disks are served over NBD (under a restore
// lease, for as long as the VM reads from the point), overlays take its
// writes. The VM runs when this returns; serving goes on until ctx ends
// (Wait), and the session lives on until it is committed or discarded.
//
// The session's serving is a task (kind instant) from start to the end of
// Wait: who ran which point, and for how long, stays in the catalog.
func (s *Service) InstantStart(ctx context.Context, in InstantStartInput) (*Serving[api.InstantSession], error) {
	ctx, t := s.startTask(ctx, withDetail(s.pointTask(task.KindInstant, in.Point), "instant recovery of "+in.Point))
	pt, err := s.openPoint(ctx, in.Point, "instant recovery of "+in.Point)
	if err != nil {
		t.Finish(err)
		return nil, err
	}
	o := instant.StartOptions{StateDir: s.cfg.StateDir, ReconnectDelay: in.ReconnectDelay, Log: s.log}
	if pointVMKind(pt.snap) == "libvirt" {
		conn := in.Connection
		if conn == "" {
			conn = pt.snap.Source.Connection
		}
		d, closeConn, err := s.instantDomains(ctx, conn)
		if err != nil {
			pt.release()
			t.Finish(err)
			return nil, err
		}
		defer closeConn()
		o.Domain = &instant.DomainOptions{Domains: d, Connection: conn, Name: in.Name, Datastore: in.Datastore}
	}
	sess, wait, err := instant.Start(ctx, pt.r, pt.snap, o)
	if err != nil {
		pt.release()
		t.Finish(err)
		return nil, err
	}
	t.Log(slog.LevelInfo, "serving a VM from a backup point", "session", sess.ID, "point", pt.snap.ID.String(), "vm", pt.snap.Source.VMName)
	return &Serving[api.InstantSession]{Doc: instantDoc(sess), wait: func() error {
		defer pt.release()
		err := wait()
		t.Finish(err)
		return err
	}}, nil
}

// InstantServe serves a session's disks again after its server died and
// resumes the VM (Resumed says whether it was paused); serving goes on
// until ctx ends.
func (s *Service) InstantServe(ctx context.Context, id string) (*Serving[InstantServed], error) {
	sess, err := instant.Load(s.cfg.StateDir, id)
	if err != nil {
		return nil, err
	}
	ctx, t := s.startTask(ctx, withDetail(s.repoTask(task.KindInstant, s.cfg.Repository.Location), "serve instant recovery "+id))
	fail := func(err error) (*Serving[InstantServed], error) {
		t.Finish(err)
		return nil, err
	}
	r, release, err := s.open(ctx, defaultRepo(), restoreLease("instant recovery "+sess.ID))
	if err != nil {
		return fail(err)
	}
	srv, err := instant.Reserve(ctx, r, sess, s.log)
	if err != nil {
		release()
		return fail(err)
	}
	t.Log(slog.LevelInfo, "serving a VM from a backup point again", "session", sess.ID)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	resumed, err := qemu.Resume(ctx, sess.QMPSocket)
	if err != nil {
		s.log.Warn("could not resume the VM", "err", err)
	}
	return &Serving[InstantServed]{Doc: InstantServed{Session: instantDoc(sess), Resumed: resumed}, wait: func() error {
		defer release()
		err := <-served
		t.Finish(err)
		return err
	}}, nil
}

// InstantServed is a session served again.
type InstantServed struct {
	Session api.InstantSession
	// Resumed: the VM was paused and runs again.
	Resumed bool
}

// InstantList lists the instant recovery sessions and their state.
func (s *Service) InstantList(ctx context.Context) ([]api.InstantSession, error) {
	ss, err := instant.List(s.cfg.StateDir)
	if err != nil {
		return nil, err
	}
	out := []api.InstantSession{}
	for _, sess := range ss {
		doc := instantDoc(sess)
		if sess.IsDomain() {
			doc.VMRunning = s.domainRunning(ctx, sess)
		}
		out = append(out, doc)
	}
	return out, nil
}

// InstantCommitInput is where a recovered VM's disks go.
type InstantCommitInput struct {
	ID  string
	Dir string
	// Format is raw or qcow2 (default).
	Format string
}

// InstantCommit moves a recovered VM live onto production storage and
// stops serving its backup.
func (s *Service) InstantCommit(ctx context.Context, in InstantCommitInput) (*api.InstantSession, error) {
	if in.Dir == "" {
		return nil, invalidf("no target directory given (--to)")
	}
	if in.Format == "" {
		in.Format = "qcow2"
	}
	return run(ctx, s, withDetail(TaskSpec{Kind: task.KindInstant, Object: "/system/instant/" + in.ID}, "commit "+in.ID), func(ctx context.Context, t Task) (*api.InstantSession, error) {
		sess, err := instant.Load(s.cfg.StateDir, in.ID)
		if err != nil {
			return nil, err
		}
		if sess.IsDomain() {
			// The target is a storage pool or a directory of libvirt's host.
			d, closeConn, err := s.instantDomains(ctx, sess.Connection)
			if err != nil {
				return nil, err
			}
			defer closeConn()
			t.Log(slog.LevelInfo, "copying the disks", "domain", sess.Domain, "to", in.Dir)
			if err := instant.CommitDomain(ctx, sess, d, in.Dir, in.Format); err != nil {
				return nil, err
			}
			doc := instantDoc(sess)
			doc.VMRunning = true
			return &doc, nil
		}
		dir, err := filepath.Abs(in.Dir)
		if err != nil {
			return nil, err
		}
		t.Log(slog.LevelInfo, "mirroring the disks", "vm", sess.VM, "to", dir)
		if err := instant.Commit(ctx, sess, dir, in.Format); err != nil {
			return nil, err
		}
		doc := instantDoc(sess)
		return &doc, nil
	})
}

// InstantDiscard stops a VM running from its backup and deletes what it
// wrote; a committed VM is left running and only the session goes.
func (s *Service) InstantDiscard(ctx context.Context, id string) (*api.InstantSession, error) {
	sess, err := instant.Load(s.cfg.StateDir, id)
	if err != nil {
		return nil, err
	}
	if sess.IsDomain() {
		d, closeConn, err := s.instantDomains(ctx, sess.Connection)
		if err != nil {
			return nil, err
		}
		defer closeConn()
		if err := instant.DiscardDomain(ctx, sess, d); err != nil {
			return nil, err
		}
	} else if err := instant.Discard(ctx, sess); err != nil {
		return nil, err
	}
	doc := instantDoc(sess)
	return &doc, nil
}

// InstantExportInput is a point to serve and where.
type InstantExportInput struct {
	Point string
	// Listen is unix:PATH or tcp:HOST:PORT.
	Listen string
}

// InstantExport serves every disk of a backup point read-only over NBD,
// straight from the default repository, under a restore lease, until ctx
// ends.
func (s *Service) InstantExport(ctx context.Context, in InstantExportInput) (*Serving[api.Export], error) {
	network, addr, ok := strings.Cut(in.Listen, ":")
	if !ok || (network != "unix" && network != "tcp") {
		return nil, invalidf("--listen must be unix:PATH or tcp:HOST:PORT, not %q", in.Listen)
	}
	pt, err := s.openPoint(ctx, in.Point, "nbd export of "+in.Point)
	if err != nil {
		return nil, err
	}
	exports, names, err := nbdexport.Exports(ctx, pt.r, pt.snap)
	if err != nil {
		pt.release()
		return nil, err
	}
	l, err := nbdexport.Listen(network, addr)
	if err != nil {
		pt.release()
		return nil, err
	}
	doc := api.Export{PointID: pt.snap.ID.String(), Listen: in.Listen, Exports: list(names)}
	return &Serving[api.Export]{Doc: doc, wait: func() error {
		defer pt.release()
		return nbdexport.Serve(ctx, l, exports, names, s.log)
	}}, nil
}

func instantDoc(sess *instant.Session) api.InstantSession {
	d := api.InstantSession{ID: sess.ID, PointID: sess.Snapshot, Repository: sess.Repository, VM: sess.VM, Dir: sess.Dir,
		NBDSocket: sess.NBDSocket, QMPSocket: sess.QMPSocket, Console: sess.Console, ServerPID: sess.ServerPID, VMPID: sess.VMPID,
		Disks: []api.InstantDisk{}, State: sess.State, Started: sess.Started, Targets: list(sess.Targets),
		ServerRunning: sess.ServerAlive(), VMRunning: sess.VMAlive(), Connection: sess.Connection, Domain: sess.Domain, DomainID: sess.DomainID}
	for _, d2 := range sess.Disks {
		d.Disks = append(d.Disks, api.InstantDisk{Key: d2.Key, SizeBytes: d2.Size, Overlay: d2.Overlay})
	}
	return d
}
