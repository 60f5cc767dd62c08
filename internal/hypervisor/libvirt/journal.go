package libvirt

import (
	"path/filepath"
	"time"

	"github.com/coffer-backup/coffer/internal/statefile"
)

// journal records, before each step, what a session is about to create or
// change on a domain, so CleanupLeftovers can undo exactly that after a
// crash and nothing else. It is rewritten atomically at every step.
type journal struct {
	path string
	journalState
}

type journalState struct {
	URI        string    `json:"uri"`
	DomainUUID string    `json:"domain_uuid"`
	DomainName string    `json:"domain_name"`
	SessionID  string    `json:"session"`
	Created    time.Time `json:"created"`
	PID        int       `json:"coffer_pid"`
	// Socket is the NBD export's socket: it identifies coffer's backup
	// job (libvirt runs one per domain; cleanup aborts it only when it is
	// this one).
	Socket  string   `json:"socket"`
	Scratch []string `json:"scratch,omitempty"`
	// Job: BackupBegin was called (or was about to be).
	Job bool `json:"job,omitempty"`
	// Checkpoint is the checkpoint this session creates; Keep says the
	// backup point holding its token was committed, so cleanup keeps it.
	Checkpoint string `json:"checkpoint,omitempty"`
	Keep       bool   `json:"keep,omitempty"`
	Frozen     bool   `json:"frozen,omitempty"`    // guest filesystems may be frozen
	Suspended  bool   `json:"suspended,omitempty"` // coffer paused the domain
	// Offline: the session reads a shut-off domain's images (offline.go).
	Offline *offlineState `json:"offline,omitempty"`
	// Restore: this journal is a restore to a new domain (DomainUUID),
	// not a backup session.
	Restore *restoreState `json:"restore,omitempty"`
	// Original: this journal is a restore onto the original domain.
	Original *originalState `json:"original,omitempty"`
	// Instant: this journal is an instant recovery's domain being started
	// or committed.
	Instant *instantState `json:"instant,omitempty"`
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
