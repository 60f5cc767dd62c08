package qemu

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/qmp"
)

// memoryKey is the key of the memory-state stream in a backup point.
const memoryKey = "memory"

// saveMemory writes the VM's RAM and device state (QEMU's migration
// stream) to a file in the state directory, inside the stopped window, so
// it matches the disks' snapshot instant. The stream's size is only known
// at its end, which is why it is staged in a file rather than streamed
// into the repository. Migrating inactivates the VM's block nodes; the
// deferred `cont` of freezeAndSwitch activates them again.
func (s *session) saveMemory(ctx context.Context) error {
	s.j.MemoryFile = filepath.Join(s.c.cfg.StateDir, "fleece", filepath.Base(s.j.path)+".vmstate")
	if err := s.j.save(); err != nil {
		return err
	}
	sub := s.cl.Subscribe()
	defer sub.Cancel()
	if err := migrationEvents(ctx, s.cl); err != nil {
		return fmt.Errorf("save memory: %w", err)
	}
	// QEMU 7.2 has no file: migration URI; exec runs through /bin/sh, so
	// the path is single-quoted.
	uri := "exec:cat > '" + strings.ReplaceAll(s.j.MemoryFile, "'", `'\''`) + "'"
	if err := s.cl.Execute(ctx, "migrate", map[string]any{"uri": uri}, nil); err != nil {
		return fmt.Errorf("save memory: %w", err)
	}
	for {
		ev, err := sub.Wait(ctx, "MIGRATION", nil)
		if err != nil {
			return fmt.Errorf("save memory: %w", err)
		}
		switch {
		case qmp.FieldIs("status", "completed")(ev.Data):
			return nil
		case qmp.FieldIs("status", "failed")(ev.Data), qmp.FieldIs("status", "cancelled")(ev.Data):
			var info struct {
				Error string `json:"error-desc"`
			}
			_ = s.cl.Execute(ctx, "query-migrate", nil, &info)
			return fmt.Errorf("save memory: migration %s: %s", migrationStatus(ev.Data), info.Error)
		}
	}
}

// migrationEvents turns on QEMU's MIGRATION events (off by default), which
// report the save's progress. It changes nothing else in the VM.
func migrationEvents(ctx context.Context, cl *qmp.Client) error {
	return cl.Execute(ctx, "migrate-set-capabilities", map[string]any{
		"capabilities": []map[string]any{{"capability": "events", "state": true}}}, nil)
}

func migrationStatus(d json.RawMessage) string {
	var v struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(d, &v)
	return v.Status
}

// memorySnapshot describes the saved state as a stream of the session.
func (s *session) memorySnapshot() (hypervisor.DiskSnapshot, bool) {
	if s.j.MemoryFile == "" {
		return hypervisor.DiskSnapshot{}, false
	}
	fi, err := os.Stat(s.j.MemoryFile)
	if err != nil {
		return hypervisor.DiskSnapshot{}, false
	}
	return hypervisor.DiskSnapshot{
		DiskInfo: hypervisor.DiskInfo{Key: memoryKey, Name: memoryKey, Size: fi.Size(), Format: "qemu-migration"},
		Kind:     hypervisor.KindMemory, Changes: "full",
	}, true
}

// memoryReader reads the staged state file.
type memoryReader struct {
	*os.File
	size int64
}

func openMemory(path string) (*memoryReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close() // read only
		return nil, err
	}
	return &memoryReader{File: f, size: fi.Size()}, nil
}

func (m *memoryReader) Size() int64 { return m.size }

func (m *memoryReader) Allocated(context.Context) ([]hypervisor.Extent, error) {
	return []hypervisor.Extent{{Offset: 0, Length: m.size}}, nil
}

func (m *memoryReader) Changed(context.Context) ([]hypervisor.Extent, bool, error) {
	return nil, false, nil
}

// dropMemory cancels a memory save still running and removes its file.
func dropMemory(ctx context.Context, cl *qmp.Client, j *journalState) {
	if j.MemoryFile == "" {
		return
	}
	_ = cl.Execute(ctx, "migrate_cancel", nil, nil)
	_ = os.Remove(j.MemoryFile) // best effort: the migration was cancelled
}

// LoadMemory resumes a VM started with LaunchSpec.Incoming from a memory
// state saved in WithMemory mode: the guest continues where it was at the
// backup instant instead of booting.
func LoadMemory(ctx context.Context, sock, stateFile string) error {
	cl, err := qmp.Dial(ctx, sock)
	if err != nil {
		return err
	}
	defer func() { _ = cl.Close() }()
	sub := cl.Subscribe()
	defer sub.Cancel()
	if err := migrationEvents(ctx, cl); err != nil {
		return fmt.Errorf("load memory: %w", err)
	}
	uri := "exec:cat '" + strings.ReplaceAll(stateFile, "'", `'\''`) + "'"
	if err := cl.Execute(ctx, "migrate-incoming", map[string]any{"uri": uri}, nil); err != nil {
		return fmt.Errorf("load memory: %w", err)
	}
	for {
		ev, err := sub.Wait(ctx, "MIGRATION", nil)
		if err != nil {
			return fmt.Errorf("load memory: %w", err)
		}
		switch migrationStatus(ev.Data) {
		case "completed":
			var st struct {
				Status string `json:"status"`
			}
			if err := cl.Execute(ctx, "query-status", nil, &st); err != nil {
				return err
			}
			if st.Status != "running" {
				return cl.Execute(ctx, "cont", nil, nil)
			}
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("load memory: the saved state does not fit this VM (migration %s)", migrationStatus(ev.Data))
		}
	}
}
