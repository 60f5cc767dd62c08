package restore

import (
	"encoding/json"
	"os"
	"sync"

	"github.com/coffer-backup/coffer/internal/statefile"
)

// checkpoint records which spans of a restore are durably written, so an
// interrupted restore resumes where it stopped. A span is recorded only
// after the target was fsynced, so a crash can lose progress, never data.
type checkpoint struct {
	path    string // "" disables checkpoints (block devices)
	snap    string
	disk    string
	count   uint64
	mu      sync.Mutex
	done    []uint64 // bitset of durable spans
	pending []uint64 // bitset of written, not yet durable spans
}

type checkpointFile struct {
	Snapshot string   `json:"snapshot"`
	Disk     string   `json:"disk"`
	Count    uint64   `json:"count"`
	Done     []uint64 `json:"done"`
}

func newCheckpoint(path, snap, disk string, count uint64) *checkpoint {
	words := (count + 63) / 64
	return &checkpoint{path: path, snap: snap, disk: disk, count: count, done: make([]uint64, words), pending: make([]uint64, words)}
}

// load reads a previous checkpoint for the same snapshot and disk.
func (c *checkpoint) load() bool {
	if c.path == "" {
		return false
	}
	raw, err := os.ReadFile(c.path)
	if err != nil {
		return false
	}
	var f checkpointFile
	if json.Unmarshal(raw, &f) != nil || f.Snapshot != c.snap || f.Disk != c.disk || f.Count != c.count || len(f.Done) != len(c.done) {
		return false
	}
	copy(c.done, f.Done)
	copy(c.pending, f.Done)
	return true
}

func (c *checkpoint) isDone(i uint64) bool {
	return c.done[i/64]&(1<<(i%64)) != 0
}

func (c *checkpoint) markDone(i uint64) {
	c.mu.Lock()
	c.pending[i/64] |= 1 << (i % 64)
	c.mu.Unlock()
}

// save makes written data durable, then records it.
func (c *checkpoint) save(f *os.File) error {
	if c.path == "" {
		return nil
	}
	c.mu.Lock()
	snapshot := append([]uint64(nil), c.pending...)
	c.mu.Unlock()
	if err := f.Sync(); err != nil {
		return err
	}
	// Written atomically: a crash leaves the previous checkpoint or this one.
	return statefile.WriteJSON(c.path, checkpointFile{Snapshot: c.snap, Disk: c.disk, Count: c.count, Done: snapshot})
}
