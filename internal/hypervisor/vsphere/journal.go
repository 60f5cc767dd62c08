package vsphere

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// journal records a session's VM snapshot before it is requested, so that
// after a crash CleanupLeftovers removes exactly that snapshot and nothing
// else. It is rewritten atomically (write, fsync, rename).
type journal struct {
	path string
	journalState
}

type journalState struct {
	SessionID string    `json:"session"`
	StateID   string    `json:"state_id"` // installation identity, also in the snapshot description
	PID       int       `json:"coffer_pid"`
	VM        string    `json:"vm"` // MoRef value
	VMName    string    `json:"vm_name"`
	Snapshot  string    `json:"snapshot"` // "coffer-<session>"
	Created   time.Time `json:"created"`
	// Suspended: coffer suspended the VM (Suspend mode) and must power it
	// back on, also after a crash.
	Suspended bool `json:"suspended,omitempty"`
}

func journalDir(stateDir string) string { return filepath.Join(stateDir, "journal") }

func newJournal(stateDir string, st journalState) *journal {
	return &journal{path: filepath.Join(journalDir(stateDir), st.Snapshot+".json"), journalState: st}
}

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
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, j.path)
	}
	if err != nil {
		return fmt.Errorf("vsphere: journal: %w", err)
	}
	if d, err := os.Open(filepath.Dir(j.path)); err == nil {
		d.Sync() // make the rename durable before the snapshot exists
		d.Close()
	}
	return nil
}

func (j *journal) remove() error {
	if err := os.Remove(j.path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
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

// processAlive reports whether pid runs on this machine (Linux /proc).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}
