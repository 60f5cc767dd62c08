package fake

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// StorageSnapshotter returns a storage-level snapshot provider over this
// fleet's datastores (the test stand-in for array snapshots).
func (c *Connector) StorageSnapshotter() hypervisor.StorageSnapshotter { return storageSnapshotter{c} }

// FailStorage makes storage snapshots of a datastore fail with err (nil
// clears it).
func (c *Connector) FailStorage(datastore string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.storageFail == nil {
		c.storageFail = map[string]error{}
	}
	c.storageFail[datastore] = err
}

type storageSnapshotter struct{ c *Connector }

type storageSnapshot struct {
	c         *Connector
	label     string
	datastore string
	images    map[string]map[int64]uint32 // disk path -> block versions
	once      sync.Once
	orphan    bool // its coffer process crashed
	deleted   bool
}

// SnapshotDatastore captures every disk file on the datastore. A VM with an
// unreleased snapshot has its base file frozen at the snapshot instant (the
// hypervisor writes to a delta), so the image holds that instant.
func (s storageSnapshotter) SnapshotDatastore(ctx context.Context, datastore, label string, _ []hypervisor.DiskInfo) (hypervisor.StorageSnapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(label, "coffer-") {
		return nil, fmt.Errorf("fake: storage snapshot label %q must start with coffer-", label)
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.storageFail[datastore]; err != nil {
		return nil, fmt.Errorf("storage snapshot of %s: %w", datastore, err)
	}
	snap := &storageSnapshot{c: c, label: label, datastore: datastore, images: map[string]map[int64]uint32{}}
	for _, st := range c.vms {
		var held *session
		for sess := range c.live {
			if sess.st == st && !sess.released {
				held = sess
			}
		}
		for i, d := range st.disks {
			if d.info.Datastore != datastore {
				continue
			}
			if held != nil {
				snap.images[d.info.Path] = copyVersions(held.frozen[i])
			} else {
				snap.images[d.info.Path] = copyVersions(d.written)
			}
		}
	}
	c.storage[snap] = true
	c.storageTaken++
	return snap, nil
}

func (s *storageSnapshot) OpenDisk(ctx context.Context, vm hypervisor.VMRef, disk hypervisor.DiskInfo) (hypervisor.DiskReader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.deleted {
		return nil, fmt.Errorf("fake: storage snapshot %s deleted", s.label)
	}
	img, ok := s.images[disk.Path]
	st := s.c.byID[vm.ID]
	if !ok || st == nil {
		return nil, fmt.Errorf("disk %s of %s in storage snapshot %s: %w", disk.Path, vm.Name, s.label, hypervisor.ErrNotFound)
	}
	for _, d := range st.disks {
		if d.info.Path == disk.Path {
			return &reader{ctx: ctx, c: s.c, disk: d, frozen: img}, nil
		}
	}
	return nil, fmt.Errorf("disk %s: %w", disk.Path, hypervisor.ErrNotFound)
}

func (s *storageSnapshot) Delete(ctx context.Context) error {
	s.once.Do(func() {
		s.c.mu.Lock()
		defer s.c.mu.Unlock()
		if !s.deleted {
			s.deleted = true
			s.c.storageDeleted++
			delete(s.c.storage, s)
		}
	})
	return nil
}
