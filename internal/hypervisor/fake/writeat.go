package fake

import (
	"context"
	"fmt"
	"sync"
)

// WriteAt writes data at byte off of disk key of a VM, like a guest
// writing known bytes: the blocks it touches get a new version whose
// content is kept (the rest of such a block keeps what it held), and are
// marked dirty for change tracking. Tests that check what a session reads
// use it; Write is for the bulk of a fleet's changes.
func (c *Connector) WriteAt(vmName, key string, off int64, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.mustVM(vmName)
	var d *diskState
	for _, x := range st.disks {
		if x.info.Key == key {
			d = x
		}
	}
	if d == nil || off < 0 || off+int64(len(data)) > d.info.Size {
		return fmt.Errorf("fake: no disk %s of %s holds %d bytes at %d", key, vmName, len(data), off)
	}
	r := reader{ctx: context.Background(), c: c, disk: d, frozen: d.written}
	for len(data) > 0 {
		b, in := off/BlockSize, off%BlockSize
		buf := make([]byte, BlockSize)
		r.block(b, buf)
		n := copy(buf[in:], data)
		d.written[b]++
		d.kept.Store(keptKey{b, d.written[b]}, buf)
		for _, set := range d.dirty {
			set[b] = true
		}
		data, off = data[n:], off+int64(n)
	}
	return nil
}

// keptKey names one version of one block written by WriteAt.
type keptKey struct {
	block   int64
	version uint32
}

// keptBlocks holds the content of block versions WriteAt made; a version
// is stored once and never changed, so readers need no lock.
type keptBlocks = sync.Map
