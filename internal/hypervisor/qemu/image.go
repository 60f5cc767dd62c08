package qemu

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/nbd/qemunbd"
)

// OpenImage reads a disk image file (qcow2, raw, any format qemu-nbd
// knows) as a DiskReader, through a read-only qemu-nbd of its own: used
// for the disk files inside a storage snapshot, which no QEMU has open.
// Allocation comes from the image (holes and zero clusters are skipped);
// Changed reports no change set.
func OpenImage(ctx context.Context, path, format string, conns int) (hypervisor.DiskReader, error) {
	srv, err := ServeImage(ctx, path, format, "", max(conns, 1)+2)
	if err != nil {
		return nil, err
	}
	r, err := srv.Open(ctx, conns)
	if err != nil {
		srv.Stop()
		return nil, err
	}
	return &imageReader{diskReader: r, stop: srv.Stop}, nil
}

// ImageServer is a read-only qemu-nbd serving one image file on a unix
// socket of its own, export "disk". While it runs, QEMU's image locking
// keeps every writer out: a QEMU that would open the image read-write
// (a VM starting from it) fails with "Failed to get "write" lock", so the
// image cannot change under the server's readers.
//
// qemu-nbd is socket-activated on a socket listened on before it starts,
// so readers connect at once without waiting for it, and it is killed
// with coffer (Pdeathsig): a killed coffer leaves no qemu-nbd holding a
// snapshot's files or a VM's disks.
type ImageServer struct {
	path, sock, bitmap string
	srv                *qemunbd.Server
	stop               func()
}

// ServeImage starts the server for path, with up to clients connections
// at once, and returns once qemu-nbd has opened the image (so a lock it
// could not take is this call's error). A bitmap names a persistent dirty
// bitmap of a qcow2 image to export beside the data
// (qemu:dirty-bitmap:NAME), which the server's readers give as their
// change set.
func ServeImage(ctx context.Context, path, format, bitmap string, clients int) (*ImageServer, error) {
	if format == "" {
		format = "raw"
	}
	args := []string{"--read-only", "--persistent", fmt.Sprintf("--shared=%d", max(clients, 1)+1), "--format=" + format,
		"--export-name=disk", "--cache=none", "--aio=threads"}
	if bitmap != "" {
		args = append(args, "--bitmap="+bitmap)
	}
	srv, err := qemunbd.Start(path, args...)
	if err != nil {
		return nil, err
	}
	s := &ImageServer{path: path, sock: srv.Sock, bitmap: bitmap, srv: srv, stop: srv.Kill}
	// The handshake completes only once qemu-nbd has opened the image.
	probe, err := s.Open(ctx, 1)
	if err != nil {
		s.Stop()
		return nil, err
	}
	_ = probe.Close()
	return s, nil
}

// Open connects a reader with conns connections.
func (s *ImageServer) Open(ctx context.Context, conns int) (*diskReader, error) {
	d := journalDisk{ID: filepath.Base(s.path), Export: "disk", Changes: "full"}
	r, err := openReader(ctx, "unix", s.sock, d, max(conns, 1))
	if err != nil {
		return nil, fmt.Errorf("open %s through qemu-nbd: %w: %s", s.path, err, s.srv.Reason(ctx))
	}
	return r, nil
}

// OpenDisk connects a reader whose Changed is the exported bitmap's dirty
// ranges (none when the server exports no bitmap).
func (s *ImageServer) OpenDisk(ctx context.Context, conns int) (hypervisor.DiskReader, error) {
	r, err := s.Open(ctx, conns)
	if err != nil {
		return nil, err
	}
	return &bitmapReader{diskReader: r, bitmap: s.bitmap}, nil
}

// Stop ends the server (its readers' reads fail from then on) and
// releases the image's lock. It is idempotent.
func (s *ImageServer) Stop() {
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
}

// bitmapReader gives the server's exported bitmap as the change set.
type bitmapReader struct {
	*diskReader
	bitmap string
}

// Changed implements hypervisor.DiskReader.
func (r *bitmapReader) Changed(ctx context.Context) ([]hypervisor.Extent, bool, error) {
	if r.bitmap == "" {
		return nil, false, nil
	}
	ext, err := r.Dirty(ctx, r.bitmap)
	return ext, err == nil, err
}

type imageReader struct {
	*diskReader
	stop func()
}

func (r *imageReader) Close() error {
	err := r.diskReader.Close()
	if r.stop != nil {
		r.stop()
		r.stop = nil
	}
	return errors.Join(err)
}
