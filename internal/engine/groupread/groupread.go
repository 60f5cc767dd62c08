// Package groupread reads a VM of a group: datastore batch from the
// batch's storage snapshot: data and allocation from the storage, change
// sets from the VM session taken in the batch (or from the storage, where
// the hypervisor lost them). The engine reads its batches' VMs with it in
// its own process, and a fleet's worker reads a batch handed to it
// (internal/fleet), with the same code.
package groupread

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Held is a VM of a batch between its snapshot and its read: the VM
// session taken in the batch (released early; its change sets stay
// readable), the plan it was taken for, and the storage snapshot its
// disks are read from.
type Held struct {
	VM      hypervisor.VM
	Sess    hypervisor.Session
	Plan    backup.Plan
	Storage hypervisor.StorageSnapshot
}

// Read backs up a VM of a batch as its batch planned it: data and
// allocation from the storage snapshot, change sets from the VM session
// (or from the storage, where the hypervisor lost them).
func Read(ctx context.Context, w *repo.Writer, h *Held, req backup.VMRequest, o backup.Options) (*repo.Point, error) {
	req.Time = time.Now()
	ss := &storageSession{Session: h.Sess, h: h}
	ss.trackFromStorage(ctx)
	return backup.RunVM(ctx, w, h.Plan, ss, req, o)
}

type storageSession struct {
	hypervisor.Session
	h *Held
	// fromStorage holds the change sets taken from the storage snapshots
	// for disks whose hypervisor change tracking was lost, by disk key.
	fromStorage map[string][]hypervisor.Extent
	notes       []string
}

func (s *storageSession) OpenDisk(ctx context.Context, key string) (hypervisor.DiskReader, error) {
	var info *hypervisor.DiskInfo
	for _, d := range s.Session.Disks() {
		if d.Key == key {
			info = &d.DiskInfo
		}
	}
	if info == nil {
		return nil, fmt.Errorf("disk %s: %w", key, hypervisor.ErrNotFound)
	}
	meta, err := s.Session.OpenDisk(ctx, key)
	if err != nil {
		return nil, err
	}
	data, err := s.h.Storage.OpenDisk(ctx, s.h.VM.VMRef, *info)
	if err != nil {
		_ = meta.Close() // only read: the open error is the one to report
		return nil, fmt.Errorf("disk %s in the storage snapshot: %w", info.Name, err)
	}
	r := &storageReader{DiskReader: data, meta: meta}
	if ext, ok := s.fromStorage[key]; ok {
		r.changed = &ext
	}
	return r, nil
}

// storageReader reads data and allocation from the storage snapshot and
// the change set from the hypervisor session.
type storageReader struct {
	hypervisor.DiskReader
	meta    hypervisor.DiskReader
	changed *[]hypervisor.Extent // from the storage snapshots, when set
}

func (r *storageReader) Changed(ctx context.Context) ([]hypervisor.Extent, bool, error) {
	if r.changed != nil {
		return *r.changed, true, nil
	}
	return r.meta.Changed(ctx)
}

func (r *storageReader) Close() error {
	err := r.DiskReader.Close()
	if merr := r.meta.Close(); err == nil {
		err = merr
	}
	return err
}

// Label is the label of a batch's storage snapshot of datastore ds,
// taken at now for job.
func Label(job int64, ds string, now time.Time) string {
	return fmt.Sprintf("coffer-job%d-%s-%d", job, LabelPart(ds), now.UnixNano()%1e9)
}

// LabelPart makes a datastore name fit in a storage snapshot label, which
// names a directory or an array object: a QEMU datastore is a path, so
// separators and other characters become '_', and a long name keeps its
// end (the part that tells datastores apart).
func LabelPart(ds string) string {
	b := []byte(strings.Trim(ds, "/"))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 60 {
		b = b[len(b)-60:]
	}
	if len(b) == 0 {
		return "root"
	}
	return string(b)
}
