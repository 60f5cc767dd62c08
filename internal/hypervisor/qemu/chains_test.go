package qemu_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/repo"
)

// TestTwoChainsInterleaved: a local chain and an offsite chain of the same
// VM, each to its own repository, backed up in turns. Each incremental
// reads only what changed since its own chain's last point (none is
// turned into a full read by the other chain's backups, a new full
// included), and restores equal to the disk at its instant. A chain left
// unused past the connection's expiry loses its bitmaps.
func TestTwoChainsInterleaved(t *testing.T) {
	l := startLab(t, "")
	repos := map[string]*repo.Repository{"local": l.repo, "offsite": newTestRepo(t)}
	backupOn := func(chain, mode string) *repo.Point {
		t.Helper()
		s, err := backuptest.BackupVM(t, repos[chain], l.conn, backup.VMRequest{Connection: "lab", VM: l.ref, Mode: mode,
			SnapshotMode: hypervisor.CrashConsistent, Chain: chain})
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", chain, mode, err, l.vm.Console())
		}
		return s
	}
	// incremental backs a chain up with the guest paused around it, checks
	// that the point is incremental, read less than a full and restores
	// equal to the disk at its instant.
	incremental := func(chain string, full *repo.Point) *repo.Point {
		t.Helper()
		if err := l.admin.Execute(l.ctx, "stop", nil, nil); err != nil {
			t.Fatal(err)
		}
		truth := l.liveImage("vda")
		inc := backupOn(chain, "incremental")
		if err := l.admin.Execute(l.ctx, "cont", nil, nil); err != nil {
			t.Fatal(err)
		}
		if inc.Mode != "incremental" || inc.BytesRead >= full.BytesRead || len(inc.Warnings) != 0 {
			t.Fatalf("%s incremental: mode %s, read %d (its full read %d), warnings %q", chain, inc.Mode, inc.BytesRead, full.BytesRead, inc.Warnings)
		}
		if got, _ := os.ReadFile(l.restoreDiskFrom(repos[chain], inc, "vda")); !bytes.Equal(got, truth) {
			t.Fatalf("%s incremental differs from the disk at its instant", chain)
		}
		return inc
	}
	fullLocal := backupOn("local", "full")
	fullOffsite := backupOn("offsite", "full")
	l.waitWrites()
	incremental("local", fullLocal)
	l.waitWrites()
	incremental("offsite", fullOffsite)
	// A new full of the local chain leaves the offsite chain's tracking.
	fullLocal = backupOn("local", "full")
	l.waitWrites()
	incremental("offsite", fullOffsite)
	incremental("local", fullLocal)
	l.assertClean()
	if got := l.chainsWithBitmaps(); len(got) != 2 {
		t.Fatalf("bitmaps of chains %v, want local and offsite", got)
	}

	// Forty days on, the local chain backs up again: the offsite chain,
	// unused since, has its bitmaps removed, and its next backup reads
	// the disks in full and says why.
	later, err := qemu.New(qemu.Config{Sockets: []string{l.vm.QMPPath}, StateDir: l.state,
		Now: func() time.Time { return time.Now().Add(40 * 24 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	l.conn = later
	incremental("local", fullLocal)
	if got := l.chainsWithBitmaps(); len(got) != 1 || !strings.HasPrefix(got[0], "local.") {
		t.Fatalf("after the offsite chain expired, bitmaps of chains %v", got)
	}
	again := backupOn("offsite", "incremental")
	if again.Mode != "full" || !strings.Contains(strings.Join(again.Warnings, " "), "missing") {
		t.Fatalf("offsite after expiry: mode %s, warnings %q", again.Mode, again.Warnings)
	}
	l.assertClean()
}

// waitWrites waits until the guest has written to its disks since the
// last call, so that the next incremental has changes to read.
func (l *lab) waitWrites() {
	l.t.Helper()
	at := l.vm.Mark()
	if _, _, err := l.vm.WaitConsoleFrom(l.ctx, at, "COFFER WROTE"); err != nil {
		l.t.Fatalf("%v\n%s", err, l.vm.Console())
	}
}

// chainsWithBitmaps lists the chain labels that have coffer bitmaps on vda.
func (l *lab) chainsWithBitmaps() []string {
	l.t.Helper()
	var nodes []struct {
		Bitmaps []struct {
			Name string `json:"name"`
		} `json:"dirty-bitmaps"`
		File string `json:"file"`
	}
	if err := l.admin.Execute(l.ctx, "query-named-block-nodes", nil, &nodes); err != nil {
		l.t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, n := range nodes {
		if filepath.Base(n.File) != "vda.qcow2" {
			continue
		}
		for _, b := range n.Bitmaps {
			label, _, _ := strings.Cut(strings.TrimPrefix(b.Name, "coffer-"), "-")
			if strings.HasPrefix(b.Name, "coffer-") && !seen[label] {
				seen[label] = true
				out = append(out, label)
			}
		}
	}
	return out
}
