package vsphere

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/coffer-backup/coffer/internal/statefile"
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
	if err := statefile.WriteJSON(j.path, j.journalState); err != nil {
		return fmt.Errorf("vsphere: journal: %w", err)
	}
	return nil
}

func (j *journal) remove() error { return statefile.Remove(j.path) }

func loadJournals(stateDir string) ([]*journal, error) {
	files, err := statefile.ReadAll[journalState](journalDir(stateDir))
	var out []*journal
	for _, f := range files {
		out = append(out, &journal{path: f.Path, journalState: f.Value})
	}
	return out, err
}
