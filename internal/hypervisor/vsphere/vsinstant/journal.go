package vsinstant

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/coffer-backup/coffer/internal/statefile"
)

// Record is a recovery's journal: written before each object exists in
// the vCenter (the datastore mount, the VM), so that a coffer killed at
// any step leaves a record of everything it may have made. The serving
// process's PID says whether the recovery is still served.
type Record struct {
	Session string `json:"session"`
	PID     int    `json:"coffer_pid"`
	// Host is the ESXi host's MoRef value, Datastore the NAS datastore's
	// name on it (and its MoRef value once mounted).
	Host        string `json:"host"`
	Datastore   string `json:"datastore"`
	DatastoreID string `json:"datastore_id,omitempty"`
	VMName      string `json:"vm_name"`
	VM          string `json:"vm,omitempty"`
	// Committed: the VM runs from production storage; only the mount is
	// left to remove.
	Committed bool `json:"committed,omitempty"`
	// Dir is the session's directory (export and overlays), removed with
	// the recovery.
	Dir     string    `json:"dir"`
	Started time.Time `json:"started"`

	path string
}

func journalDir(stateDir string) string { return filepath.Join(stateDir, "instant-vsphere") }

// NewRecord starts the journal of session id in stateDir.
func NewRecord(stateDir, id string) *Record {
	return &Record{Session: id, PID: os.Getpid(), Started: time.Now().UTC(),
		path: filepath.Join(journalDir(stateDir), filepath.Base(id)+".json")}
}

// LoadRecord reads session id's journal from stateDir.
func LoadRecord(stateDir, id string) (*Record, error) {
	rs, err := statefile.ReadAll[Record](journalDir(stateDir))
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if r.Value.Session == id {
			rec := r.Value
			rec.path = r.Path
			return &rec, nil
		}
	}
	return nil, fmt.Errorf("vsphere instant recovery %s: no journal in %s: %w", id, stateDir, os.ErrNotExist)
}

func (r *Record) save() error {
	if err := statefile.WriteJSON(r.path, r); err != nil {
		return fmt.Errorf("vsphere instant recovery journal: %w", err)
	}
	return nil
}

func (r *Record) remove() error { return statefile.Remove(r.path) }

func loadRecords(stateDir string) ([]*Record, error) {
	rs, err := statefile.ReadAll[Record](journalDir(stateDir))
	var out []*Record
	for _, f := range rs {
		rec := f.Value
		rec.path = f.Path
		out = append(out, &rec)
	}
	return out, err
}
