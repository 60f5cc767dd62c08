package restoreops

import (
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"

	"context"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/instant"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/restore/nbdexport"
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

// InstantStart starts the VM of a QEMU backup point running straight from
// the default repository: its disks are served over NBD (under a restore
// lease, for as long as the VM reads from the point), overlays take its
// writes. The VM runs when this returns; serving goes on until ctx ends
// (Wait), and the session lives on until it is committed or discarded.
//
// The session's serving is a task (kind instant) from start to the end of
// Wait: who ran which point, and for how long, stays in the catalog. The
// serving runs in the caller's process: the command line waits on it, the
// server's endpoint hands it to its Background (epInstantStart).
//
// A libvirt domain's point runs as a new domain (Name, default
// VM-instant) of Connection (default: the one it was taken through), its
// overlays in pool Datastore (default: as recorded).
func (s Ops) InstantStart(ctx context.Context, call *api.InstantStartInput) (*Serving[api.InstantSession], error) {
	in, point := call.Body, call.Point
	ctx, t := s.StartJob(ctx, service.WithDetail(s.PointJob(job.KindInstant, point), "instant recovery of "+point))
	pt, err := s.OpenPoint(ctx, point, "instant recovery of "+point)
	if err != nil {
		t.Finish(err)
		return nil, err
	}
	o := instant.StartOptions{StateDir: s.Config.StateDir, ReconnectDelay: in.ReconnectDelay(), Log: s.Logger()}
	if pointVMKind(pt.Point) == "libvirt" {
		conn := in.Connection
		if conn == "" {
			conn = pt.Point.Source.Connection
		}
		d, closeConn, err := s.instantDomains(ctx, conn)
		if err != nil {
			pt.Release()
			t.Finish(err)
			return nil, err
		}
		defer closeConn()
		o.Domain = &instant.DomainOptions{Domains: d, Connection: conn, Name: in.Name, Datastore: in.Datastore}
	}
	if pointVMKind(pt.Point) == "vsphere" {
		conn := in.Connection
		if conn == "" {
			conn = pt.Point.Source.Connection
		}
		vc, closeConn, err := s.instantVCenter(ctx, conn)
		if err != nil {
			pt.Release()
			t.Finish(err)
			return nil, err
		}
		defer closeConn()
		listen := in.NFSListen
		if listen == "" {
			listen = ":2049"
		}
		o.VSphere = &instant.VSphereOptions{VCenter: vc, Connection: conn, Name: in.Name, Host: in.Host, Listen: listen, NFSAddress: in.NFSAddress}
	}
	sess, wait, err := instant.Start(ctx, pt.Repo, pt.Point, o)
	if err != nil {
		pt.Release()
		t.Finish(err)
		return nil, err
	}
	t.Log(slog.LevelInfo, "serving a VM from a backup point", "session", sess.ID, "point", pt.Point.ID.String(), "vm", pt.Point.Source.VMName)
	return &Serving[api.InstantSession]{Doc: instantDoc(sess), wait: func() error {
		defer pt.Release()
		err := wait()
		t.Finish(err)
		return err
	}}, nil
}

// InstantServe serves a session's disks again after its server died and
// resumes the VM (Resumed says whether it was paused); serving goes on
// until ctx ends, in the caller's process (the server's endpoint hands it
// to its Background: epInstantServe).
func (s Ops) InstantServe(ctx context.Context, in *api.InstantServeInput) (*Serving[InstantServed], error) {
	id := in.Session
	sess, err := instant.Load(s.Config.StateDir, id)
	if err != nil {
		return nil, err
	}
	ctx, t := s.StartJob(ctx, service.WithDetail(s.RepoJob(job.KindInstant, s.Config.Repository.Location), "serve instant recovery "+id))
	fail := func(err error) (*Serving[InstantServed], error) {
		t.Finish(err)
		return nil, err
	}
	r, release, err := s.Open(ctx, service.DefaultRepo(), service.RestoreLease("instant recovery "+sess.ID))
	if err != nil {
		return fail(err)
	}
	srv, err := instant.Reserve(ctx, r, sess, s.Logger())
	if err != nil {
		release()
		return fail(err)
	}
	t.Log(slog.LevelInfo, "serving a VM from a backup point again", "session", sess.ID)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	resumed, err := qemu.Resume(ctx, sess.QMPSocket)
	if err != nil {
		s.Logger().Warn("could not resume the VM", "err", err)
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
func (s Ops) InstantList(ctx context.Context, _ *api.InstantListInput) ([]api.InstantSession, error) {
	ss, err := instant.List(s.Config.StateDir)
	if err != nil {
		return nil, err
	}
	out := []api.InstantSession{}
	for _, sess := range ss {
		doc := instantDoc(sess)
		if sess.IsDomain() {
			doc.VMRunning = s.domainRunning(ctx, sess)
		}
		if sess.IsVSphere() {
			doc.VMRunning = s.vsphereRunning(ctx, sess)
		}
		out = append(out, doc)
	}
	return out, nil
}

// instantCommit is where a recovered VM's disks go.
type instantCommit struct {
	ID  string
	Dir string
	// Format is raw or qcow2 (default).
	Format string
}

// InstantCommit moves a recovered VM live onto production storage and
// stops serving its backup (the server's Background stops too: the VM
// runs from its new disks).
func (s Ops) InstantCommit(ctx context.Context, in *api.InstantCommitInput) (*api.InstantSession, error) {
	dir, err := s.commitTarget(in.Session, in.Body.To)
	if err != nil {
		return nil, err
	}
	doc, err := s.instantCommit(ctx, instantCommit{ID: in.Session, Dir: dir, Format: in.Body.Format})
	if err == nil && s.Config.Background != nil {
		s.Config.Background.Stop("instant " + in.Session)
	}
	return doc, err
}

// commitTarget is where a commit's disks go: a libvirt domain's may go
// to a storage pool, named without a slash; a directory is one of this
// host, confined like any other on a server (HostPath).
func (s Ops) commitTarget(id, to string) (string, error) {
	if sess, err := instant.Load(s.Config.StateDir, id); err == nil && (sess.IsDomain() && !strings.Contains(to, "/") || sess.IsVSphere()) {
		return to, nil // a storage pool, or a vSphere datastore
	}
	return s.HostPath(s.Config.Files.RestoreDir, service.RestoreDir, to)
}

func (s Ops) instantCommit(ctx context.Context, in instantCommit) (*api.InstantSession, error) {
	if in.Dir == "" {
		return nil, service.Invalidf("no target directory given (--to)")
	}
	if in.Format == "" {
		in.Format = "qcow2"
	}
	return service.Run(ctx, s.Service, service.WithDetail(service.JobSpec{Kind: job.KindInstant, Object: "/system/instant/" + in.ID}, "commit "+in.ID), func(ctx context.Context, t service.Job) (*api.InstantSession, error) {
		sess, err := instant.Load(s.Config.StateDir, in.ID)
		if err != nil {
			return nil, err
		}
		if sess.IsVSphere() {
			vc, closeConn, err := s.instantVCenter(ctx, sess.Connection)
			if err != nil {
				return nil, err
			}
			defer closeConn()
			t.Log(slog.LevelInfo, "relocating the VM", "vm", sess.Domain, "to", in.Dir)
			if err := instant.CommitVSphere(ctx, sess, vc, in.Dir); err != nil {
				return nil, err
			}
			doc := instantDoc(sess)
			doc.VMRunning = true
			return &doc, nil
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
// wrote; a committed VM is left running and only the session goes. The
// server's Background stops serving it.
func (s Ops) InstantDiscard(ctx context.Context, in *api.InstantDiscardInput) (*api.InstantSession, error) {
	doc, err := s.instantDiscard(ctx, in.Session)
	if err == nil && s.Config.Background != nil {
		s.Config.Background.Stop("instant " + in.Session)
	}
	return doc, err
}

func (s Ops) instantDiscard(ctx context.Context, id string) (*api.InstantSession, error) {
	sess, err := instant.Load(s.Config.StateDir, id)
	if err != nil {
		return nil, err
	}
	if sess.IsVSphere() {
		vc, closeConn, err := s.instantVCenter(ctx, sess.Connection)
		if err != nil {
			return nil, err
		}
		defer closeConn()
		if err := instant.DiscardVSphere(ctx, sess, vc); err != nil {
			return nil, err
		}
	} else if sess.IsDomain() {
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

// InstantExport serves every disk of a backup point read-only over NBD,
// straight from the default repository, under a restore lease, until ctx
// ends, in the caller's process: the command line serves until it is
// stopped, the server's endpoint (epExport) in its Background for the
// request's duration, on a listen address it resolved.
func (s Ops) InstantExport(ctx context.Context, call *api.InstantExportInput) (*Serving[api.Export], error) {
	listen, point := call.Body.Listen, call.Point
	network, addr, ok := strings.Cut(listen, ":")
	if !ok || (network != "unix" && network != "tcp") {
		return nil, service.Invalidf("--listen must be unix:PATH or tcp:HOST:PORT, not %q", listen)
	}
	pt, err := s.OpenPoint(ctx, point, "nbd export of "+point)
	if err != nil {
		return nil, err
	}
	exports, names, err := nbdexport.Exports(ctx, pt.Repo, pt.Point)
	if err != nil {
		pt.Release()
		return nil, err
	}
	l, err := nbdexport.Listen(network, addr)
	if err != nil {
		pt.Release()
		return nil, err
	}
	doc := api.Export{PointID: pt.Point.ID.String(), Listen: listen, Exports: apidoc.NonNil(names)}
	return &Serving[api.Export]{Doc: doc, wait: func() error {
		defer pt.Release()
		return nbdexport.Serve(ctx, l, exports, names, s.Logger())
	}}, nil
}

func instantDoc(sess *instant.Session) api.InstantSession {
	d := api.InstantSession{ID: sess.ID, PointID: sess.Snapshot, Repository: sess.Repository, VM: sess.VM, Dir: sess.Dir,
		NBDSocket: sess.NBDSocket, QMPSocket: sess.QMPSocket, Console: sess.Console, ServerPID: sess.ServerPID, VMPID: sess.VMPID,
		Disks: []api.InstantDisk{}, State: sess.State, Started: sess.Started, Targets: apidoc.NonNil(sess.Targets),
		ServerRunning: sess.ServerAlive(), VMRunning: sess.VMAlive(), Connection: sess.Connection, Domain: sess.Domain, DomainID: sess.DomainID,
		Platform: sess.Platform, Datastore: sess.Datastore, NFSAddress: sess.NFSAddress}
	for _, d2 := range sess.Disks {
		d.Disks = append(d.Disks, api.InstantDisk{Key: d2.Key, SizeBytes: d2.Size, Overlay: d2.Overlay})
	}
	return d
}
