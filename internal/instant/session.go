// Package instant is instant recovery: a backup point's VM runs from the
// repository within seconds (coffer serves its disks over NBD, QEMU writes
// to local overlays), then is moved live onto production storage (commit)
// or thrown away (discard). A session file per recovery records every
// step, so the outcome is always explicit and `coffer instant list` shows
// what is running from a backup.
package instant

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/coffer-backup/coffer/internal/statefile"
)

// States of a session.
const (
	StateRunning    = "running"    // the VM runs from the backup
	StateCommitting = "committing" // the disks are being mirrored
	StateCommitted  = "committed"  // the VM runs from production storage
)

// Session is one instant recovery, saved as dir/session.json.
type Session struct {
	ID         string        `json:"id"`
	Snapshot   string        `json:"snapshot"`
	Repository string        `json:"repository"`
	VM         string        `json:"vm"`
	Dir        string        `json:"dir"`
	NBDSocket  string        `json:"nbd_socket"`
	QMPSocket  string        `json:"qmp_socket"`
	Console    string        `json:"console"`
	ServerPID  int           `json:"server_pid"`
	VMPID      int           `json:"vm_pid"`
	Disks      []SessionDisk `json:"disks"`
	State      string        `json:"state"`
	Started    time.Time     `json:"started"`
	// Targets are the production files after a commit.
	Targets []string `json:"targets,omitempty"`
	// Warnings say what of the original VM the relaunch could not keep.
	Warnings []string `json:"warnings,omitempty"`
	// Connection, Domain and DomainID name the VM when it is a domain of
	// a libvirt connection (QMPSocket, Console and VMPID are then empty).
	Connection string `json:"connection,omitempty"`
	Domain     string `json:"domain,omitempty"`
	DomainID   string `json:"domain_id,omitempty"`
	// Platform is "vsphere" when the VM runs on an ESXi host from
	// coffer's NFS export (Connection names the vSphere connection,
	// Domain and DomainID the VM, Datastore the export's datastore, and
	// NFSListen and NFSAddress where the export is served and mounted
	// from); "" otherwise.
	Platform   string `json:"platform,omitempty"`
	Datastore  string `json:"datastore,omitempty"`
	NFSListen  string `json:"nfs_listen,omitempty"`
	NFSAddress string `json:"nfs_address,omitempty"`
}

// SessionDisk is one disk of the recovered VM.
type SessionDisk struct {
	Key     string `json:"key"`
	Size    int64  `json:"size"`
	Overlay string `json:"overlay"`
	// Nodes are the disk's block nodes in the VM, format node first.
	Nodes []string `json:"nodes"`
}

// ErrNoSession is returned for an unknown session ID.
var ErrNoSession = errors.New("no such instant recovery session")

// ErrNotQEMU is returned for a backup point that is not of a QEMU VM
// with its recorded configuration, nor of a libvirt domain with a
// connection to run it on: nothing to run it with.
var ErrNotQEMU = errors.New("not a QEMU VM's backup point")

// Root is where sessions live under a state directory.
func Root(stateDir string) string { return filepath.Join(stateDir, "instant") }

func (s *Session) path() string { return filepath.Join(s.Dir, "session.json") }

// Save writes the session atomically (write, fsync, rename).
func (s *Session) Save() error { return statefile.WriteJSON(s.path(), s) }

// Load reads session id from stateDir.
func Load(stateDir, id string) (*Session, error) {
	b, err := os.ReadFile(filepath.Join(Root(stateDir), filepath.Base(id), "session.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoSession, id)
	}
	if err != nil {
		return nil, err
	}
	var s Session
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	return &s, nil
}

// List returns every session under stateDir, oldest first.
func List(stateDir string) ([]*Session, error) {
	entries, err := os.ReadDir(Root(stateDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Session
	for _, e := range entries {
		if s, err := Load(stateDir, e.Name()); err == nil {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out, nil
}

// ServerAlive reports whether the session's NBD server process runs.
func (s *Session) ServerAlive() bool { return statefile.ProcessAlive(s.ServerPID) }

// VMAlive reports whether the recovered VM's QEMU process runs.
func (s *Session) VMAlive() bool { return statefile.ProcessAlive(s.VMPID) }
