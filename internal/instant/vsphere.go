package instant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/vsinstant"
	"github.com/coffer-backup/coffer/internal/instant/nfsserve"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
)

// PlatformVSphere marks a session whose VM runs on an ESXi host from
// coffer's NFS export.
const PlatformVSphere = "vsphere"

// VCenter is a vSphere connection (the vSphere connector) that runs a
// point's VM from coffer's NFS export.
type VCenter interface {
	Client() *vim25.Client
	// InstantStateDir is where the connection keeps its instant
	// recoveries' journals: its cleanup at start reads them there.
	InstantStateDir() string
}

// VSphereOptions are Start's for a vSphere point.
type VSphereOptions struct {
	VCenter    VCenter
	Connection string // the connection's name, recorded in the session
	Name       string // the VM's name; "" = VM-instant
	Host       string // the ESXi host's name; "" = the first connected one
	// Listen is where the NFS server listens ("host:port"); NFSAddress
	// is the address the ESXi host mounts ("" = Listen's host). ESXi's
	// NFS client connects to port 2049.
	Listen, NFSAddress string
}

// IsVSphere says whether the session's VM runs on an ESXi host.
func (s *Session) IsVSphere() bool { return s.Platform == PlatformVSphere }

// datastoreName is the NAS datastore of session id.
func datastoreName(id string) string { return "coffer-instant-" + id }

// startVSphere is Start for a vSphere point: the point's disks are
// served as flat VMDKs on an NFS export (overlays in the session's
// directory take the writes), which vsinstant mounts on the host, where
// it registers the VM and powers it on.
func startVSphere(ctx context.Context, r *repo.Repository, snap *repo.Point, cfg hypervisor.VMConfig, o StartOptions) (*Session, func() error, error) {
	v := o.VSphere
	id, dir, err := sessionDir(o.StateDir, snap)
	if err != nil {
		return nil, nil, err
	}
	ok := false
	var closers []func() error
	defer func() {
		if !ok {
			for _, c := range closers {
				_ = c() // best effort after the error returned
			}
			_ = os.RemoveAll(dir)
		}
	}()
	name := v.Name
	if name == "" {
		name = cfg.Name + "-instant"
	}
	var disks []nfsserve.Disk
	for _, d := range snap.Disks {
		dr, err := restore.OpenDisk(ctx, r, d, restore.CacheChunks(64<<20, d.ChunkSize))
		if err != nil {
			return nil, nil, err
		}
		disks = append(disks, nfsserve.Disk{Key: d.Key, Base: dr, Size: dr.Size()})
	}
	exp, err := nfsserve.Open(filepath.Join(dir, "export"), name, filepath.Join(dir, "overlays"), disks)
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, exp.Close)
	l, err := net.Listen("tcp", v.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("instant recovery: NFS server: %w", err)
	}
	nfsHost := v.NFSAddress
	if nfsHost == "" {
		nfsHost, _, _ = net.SplitHostPort(l.Addr().String())
		if ip := net.ParseIP(nfsHost); ip == nil || ip.IsUnspecified() {
			_ = l.Close()
			return nil, nil, fmt.Errorf("instant recovery: the NFS server listens on %s: name the address the ESXi host mounts it from (--nfs-address, the API's nfs_address)", l.Addr())
		}
	}
	s := &Session{ID: id, Snapshot: snap.ID.String(), Repository: r.Config().ID, VM: cfg.Name, Dir: dir,
		State: StateRunning, Started: time.Now().UTC(), ServerPID: os.Getpid(), Platform: PlatformVSphere,
		Connection: v.Connection, Domain: name, NFSAddress: nfsHost, NFSListen: l.Addr().String(), Datastore: datastoreName(id)}
	for _, d := range snap.Disks {
		s.Disks = append(s.Disks, SessionDisk{Key: d.Key, Size: d.Size, Overlay: filepath.Join(dir, "overlays", filepath.Base(d.Key))})
	}
	// The session exists before the vCenter is asked anything: list shows
	// it, and its journal's directory is the session's.
	if err := s.Save(); err != nil {
		_ = l.Close()
		return nil, nil, err
	}
	served := make(chan error, 1)
	sctx, stopServing := context.WithCancel(ctx)
	go func() { served <- nfsserve.Serve(sctx, l, exp.FS) }()
	closers = append(closers, func() error { stopServing(); return <-served })
	mapped := make(chan struct{}) // closed once the portmapper, if any, has stopped
	if pm := servePortmap(l.Addr(), o.Log); pm != nil {
		go func() { pm.Serve(sctx); close(mapped) }()
		closers = append(closers, func() error { stopServing(); <-mapped; return nil })
	} else {
		close(mapped)
	}
	rec := vsinstant.NewRecord(v.VCenter.InstantStateDir(), id)
	rec.Dir = dir
	err = vsinstant.Start(ctx, v.VCenter.Client(), cfg, rec, vsinstant.Options{Host: v.Host, NFSHost: nfsHost, NFSPath: "/",
		Datastore: s.Datastore, Name: name, Log: o.Log})
	if err != nil {
		return nil, nil, err
	}
	s.DomainID = rec.VM
	if err := s.Save(); err != nil {
		return nil, nil, errors.Join(err, vsinstant.Discard(context.WithoutCancel(ctx), v.VCenter.Client(), rec))
	}
	ok = true
	return s, func() error {
		err := <-served
		<-mapped
		return errors.Join(err, exp.Close())
	}, nil
}

// servePortmap listens for the portmapper on the NFS server's host when
// the server listens on 2049, the port ESXi's NFS client mounts: ESXi
// asks the portmapper (port 111) where the mount service is. Port 111
// needs root or CAP_NET_BIND_SERVICE; without it, or with another
// portmapper on the host, the recovery goes on with a warning, since a
// host's rpcbind may map the export already.
func servePortmap(nfs net.Addr, log *slog.Logger) *nfsserve.Portmap {
	host, port, err := net.SplitHostPort(nfs.String())
	if err != nil || port != strconv.Itoa(esxiNFSPort) {
		return nil
	}
	pm, err := nfsserve.ListenPortmap(host, esxiNFSPort)
	if err != nil {
		if log != nil {
			log.Warn("ESXi looks the export's mount service up through the portmapper on port 111, which coffer could not serve: "+
				"give coffer CAP_NET_BIND_SERVICE, or map MOUNT and NFS version 3 over TCP to port 2049 in the host's rpcbind",
				"error", err)
		}
		return nil
	}
	return pm
}

// esxiNFSPort is the port ESXi's NFS client mounts a datastore from.
const esxiNFSPort = 2049

// CommitVSphere moves the session's VM to datastore target with Storage
// vMotion and unmounts the export; the export's files and overlays go.
// On failure the VM runs on from the export and the commit can be run
// again.
func CommitVSphere(ctx context.Context, s *Session, vc VCenter, target string) error {
	if s.State == StateCommitted {
		return fmt.Errorf("session %s is already committed to %v", s.ID, s.Targets)
	}
	rec, err := vsinstant.LoadRecord(vc.InstantStateDir(), s.ID)
	if err != nil {
		return err
	}
	s.State = StateCommitting
	if err := s.Save(); err != nil {
		return err
	}
	if err := vsinstant.Commit(ctx, vc.Client(), rec, target); err != nil {
		s.State = StateRunning
		return errors.Join(err, s.Save())
	}
	s.State, s.Targets = StateCommitted, []string{target}
	if err := s.Save(); err != nil {
		return err
	}
	stopServer(s)
	// Unmounted: nothing reads the export any more.
	return errors.Join(os.RemoveAll(filepath.Join(s.Dir, "export")), os.RemoveAll(filepath.Join(s.Dir, "overlays")))
}

// DiscardVSphere ends a vSphere session: a VM still running from the
// export is powered off and unregistered and the export unmounted, then
// the session's directory (export, overlays) goes; a committed VM is
// left alone.
func DiscardVSphere(ctx context.Context, s *Session, vc VCenter) error {
	if s.State != StateCommitted {
		// No journal: nothing of the session is left in the vCenter (a
		// commit that ended before the session said so, or the cleanup).
		rec, err := vsinstant.LoadRecord(vc.InstantStateDir(), s.ID)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return err
		default:
			if err := vsinstant.Discard(ctx, vc.Client(), rec); err != nil {
				return fmt.Errorf("remove the recovered VM: %w", err)
			}
		}
	}
	stopServer(s)
	return os.RemoveAll(s.Dir)
}

// VSphereRunning says whether the session's VM is powered on.
func VSphereRunning(ctx context.Context, s *Session, vc VCenter) (bool, error) {
	if s.DomainID == "" {
		return false, nil
	}
	vm := object.NewVirtualMachine(vc.Client(), types.ManagedObjectReference{Type: "VirtualMachine", Value: s.DomainID})
	state, err := vm.PowerState(ctx)
	return err == nil && state == types.VirtualMachinePowerStatePoweredOn, err
}
