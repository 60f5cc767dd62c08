package qemu

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/statefile"
)

// journal records, before each step, what a session is about to create on
// a VM, so CleanupLeftovers can undo exactly that after a crash. It is
// rewritten atomically (write, fsync, rename) at every step.
type journal struct {
	path string
	journalState
}

type journalState struct {
	Socket    string        `json:"socket"`
	VMID      string        `json:"vm_id"`
	VMName    string        `json:"vm_name"`
	SessionID string        `json:"session"`
	Created   time.Time     `json:"created"`
	PID       int           `json:"coffer_pid"`
	Stopped   bool          `json:"stopped,omitempty"`    // coffer stopped the VM
	Frozen    bool          `json:"frozen,omitempty"`     // guest filesystems may be frozen
	NBDServer string        `json:"nbd_server,omitempty"` // socket of the NBD server coffer started
	Disks     []journalDisk `json:"disks"`
	// MemoryFile is the RAM and device state saved in WithMemory mode.
	MemoryFile string         `json:"memory_file,omitempty"`
	Extra      map[string]any `json:"extra,omitempty"`
	// Daemon: a qemu-storage-daemon, snapshotted by backup jobs.
	Daemon bool `json:"storage_daemon,omitempty"`
}

type journalDisk struct {
	ID         string `json:"id"`
	Node       string `json:"node"`
	QdevPath   string `json:"qdev"`
	Size       int64  `json:"size"`
	FleeceFile string `json:"fleece_file,omitempty"`
	FleeceNode string `json:"fleece_node,omitempty"`
	CBWNode    string `json:"cbw_node,omitempty"`
	SnapNode   string `json:"snap_node,omitempty"`
	Switched   bool   `json:"switched,omitempty"` // device drive points at CBWNode
	Export     string `json:"export,omitempty"`
	// Change tracking hand-over: NewBitmap starts at this snapshot,
	// OldBitmap (the Since base) was disabled at it; TempBitmap is a
	// differential's frozen copy of the base.
	NewBitmap  string `json:"new_bitmap,omitempty"`
	OldBitmap  string `json:"old_bitmap,omitempty"`
	TempBitmap string `json:"temp_bitmap,omitempty"`
	Changes    string `json:"changes"`
	Token      string `json:"token,omitempty"`
	Warning    string `json:"warning,omitempty"`
	// Job is a storage daemon's fleecing job (blockdev-backup sync=none
	// into FleeceNode); its filter is named CBWNode.
	Job string `json:"backup_job,omitempty"`
}

func journalDir(stateDir string) string { return filepath.Join(stateDir, "journal") }

func (j *journal) save() error { return statefile.WriteJSON(j.path, j.journalState) }

func (j *journal) remove() error { return statefile.Remove(j.path) }

func loadJournals(stateDir string) ([]*journal, error) {
	files, err := statefile.ReadAll[journalState](journalDir(stateDir))
	var out []*journal
	for _, f := range files {
		out = append(out, &journal{path: f.Path, journalState: f.Value})
	}
	return out, err
}

// safeName keeps node and export names within QEMU's identifier rules.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, s)
}
