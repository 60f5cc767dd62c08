package qemu

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"
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
}

func journalDir(stateDir string) string { return filepath.Join(stateDir, "journal") }

func (j *journal) save() error {
	b, err := json.MarshalIndent(j.journalState, "", "  ")
	if err != nil {
		return err
	}
	tmp := j.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, j.path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(j.path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func (j *journal) remove() error {
	err := os.Remove(j.path)
	if os.IsNotExist(err) {
		return nil
	}
	return err
}

func loadJournals(stateDir string) ([]*journal, error) {
	files, err := filepath.Glob(filepath.Join(journalDir(stateDir), "*.json"))
	if err != nil {
		return nil, err
	}
	var out []*journal
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		j := &journal{path: f}
		if json.Unmarshal(b, &j.journalState) != nil {
			continue
		}
		out = append(out, j)
	}
	return out, nil
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
