package replica

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// stateName is the standby's record, in its directory. It is the commit
// point of every change: a run's new overlays and a merge exist on disk
// before the record names them, and a file the record does not name is a
// leftover of a killed run, removed by the next one.
const stateName = "replica.json"

// StateVersion is the record's schema version.
const StateVersion = 1

// State is a standby's record: its restore points, oldest first, each the
// top of an overlay chain per disk.
type State struct {
	Version int    `json:"version"`
	VM      string `json:"vm"`
	// Seq is the last sequence number given to a point (file names carry it).
	Seq    int     `json:"seq"`
	Points []Point `json:"points"`
	// Merge, when set, is a pruning in progress: the oldest point's files
	// are being merged into the next point's (see prune.go).
	Merge *Merge `json:"merge,omitempty"`
	// FailedOver, when set, says the standby became the running VM
	// (internal/failover): no run writes onto it until a failback
	// clears it.
	FailedOver *FailedOver `json:"failed_over,omitempty"`
}

// FailedOver is a standby that failover made the running VM: from point
// Seq, through one writable overlay per disk above it (Overlays, by disk
// key), in RunDir (its QEMU's sockets and pid file).
type FailedOver struct {
	Seq         int               `json:"seq"`
	BackupPoint string            `json:"backup_point"`
	At          time.Time         `json:"at"`
	Planned     bool              `json:"planned"`
	Overlays    map[string]string `json:"overlays"`
	RunDir      string            `json:"run_dir"`
}

// Point returns the recorded point of seq, or nil.
func (s *State) Point(seq int) *Point {
	for i := range s.Points {
		if s.Points[i].Seq == seq {
			return &s.Points[i]
		}
	}
	return nil
}

// SaveState replaces the standby's record atomically (failover marks and
// clears FailedOver with it). The caller holds the standby (LockRun).
func SaveState(dir string, s *State) error { return saveState(dir, s) }

// LockRun takes the standby's record lock: failover and failback hold it
// while they change the record, so that no replication runs meanwhile.
// A test failover does not hold it. Close releases it.
func LockRun(dir string) (io.Closer, error) { return lockRun(dir, false) }

// LockTest takes a test failover's locks on the standby in dir: a second
// test of it is refused (ErrTestRunning), and so is a replication run
// while the lock is held (ErrTesting), since the test's VMs read its
// points; a run in progress refuses the test (ErrReplicating). A failover
// or failback may go on. The test holds it until its VMs are stopped and
// their overlays removed; Close (or the process's death) releases it.
func LockTest(dir string) (io.Closer, error) { return lockTest(dir) }

// Point is one restore point of the standby: the backup point it equals.
type Point struct {
	Seq int `json:"seq"`
	// BackupPoint is the repository point the replica equals.
	BackupPoint string `json:"backup_point"`
	// SourceTime is the backup point's instant; ReplicatedAt when this
	// point was committed.
	SourceTime   time.Time `json:"source_time"`
	ReplicatedAt time.Time `json:"replicated_at"`
	Disks        []Disk    `json:"disks"`
	// BytesWritten and BytesRead are what the run that made this point
	// wrote to the standby and read from the repository.
	BytesWritten int64 `json:"bytes_written"`
	BytesRead    int64 `json:"bytes_read"`
}

// Disk is one disk of a point: its overlay file (whose backing chain holds
// the earlier points), and the disk map it was written from.
type Disk struct {
	Key  string `json:"key"`
	Name string `json:"name,omitempty"`
	// File is the overlay's absolute path; its backing file is the
	// previous point's overlay of the same disk, in the same directory.
	File string `json:"file"`
	Size int64  `json:"size"`
	// Map is the repository's disk map of BackupPoint's disk: the next
	// run compares its own with it to find the changed spans.
	Map string `json:"map"`
}

// Merge is a pruning in progress: From's files are merged into Into's.
type Merge struct {
	From Point `json:"from"`
	Into Point `json:"into"`
}

// Newest is the newest point, or nil.
func (s *State) Newest() *Point {
	if len(s.Points) == 0 {
		return nil
	}
	return &s.Points[len(s.Points)-1]
}

// Disk returns the point's disk of key, or nil.
func (p *Point) Disk(key string) *Disk {
	for i := range p.Disks {
		if p.Disks[i].Key == key {
			return &p.Disks[i]
		}
	}
	return nil
}

// LoadState reads the standby's record in dir; a directory without one is
// a standby with no point yet.
func LoadState(dir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateName))
	if errors.Is(err, fs.ErrNotExist) {
		return &State{Version: StateVersion}, nil
	}
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("replica record %s: %w", filepath.Join(dir, stateName), err)
	}
	if s.Version > StateVersion {
		return nil, fmt.Errorf("replica record %s: version %d is newer than this coffer (%d)", filepath.Join(dir, stateName), s.Version, StateVersion)
	}
	return &s, nil
}

// saveState replaces the record atomically and durably: written to a
// temporary file, synced, renamed over the record, and the directory
// synced, so a kill at any instant leaves the old record or the new one.
func saveState(dir string, s *State) error {
	s.Version = StateVersion
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateName+".tmp")
	if err := writeSynced(tmp, b); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, stateName)); err != nil {
		return err
	}
	return syncDir(dir)
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close() // the write's error is the one to report
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// syncFile makes a file written by another process (qemu-nbd, qemu-img)
// durable before the record names it.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	serr := f.Sync()
	if cerr := f.Close(); serr == nil {
		serr = cerr
	}
	return serr
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	if cerr := d.Close(); serr == nil {
		serr = cerr
	}
	return serr
}
