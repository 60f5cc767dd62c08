package backup_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

// agentConn is a memConnector whose "guest agent" runs two commands:
// "mark TEXT" writes TEXT at the start of vda (what a database flush does
// to its disk), "fail" fails. Its Snapshot can be made to fail.
type agentConn struct {
	*memConnector
	snapshotErr error
}

func (c *agentConn) GuestRun(ctx context.Context, _ hypervisor.VMRef, argv []string) (string, error) {
	switch argv[0] {
	case "mark":
		c.write("vda", 0, []byte(argv[1]))
		return "exit 0", nil
	case "hang":
		<-ctx.Done()
		return "", ctx.Err()
	}
	return "", errors.New(argv[0] + " exited with 1")
}

func (c *agentConn) Snapshot(ctx context.Context, vm hypervisor.VMRef, req hypervisor.SnapshotRequest) (hypervisor.Session, error) {
	if c.snapshotErr != nil {
		return nil, c.snapshotErr
	}
	return c.memConnector.Snapshot(ctx, vm, req)
}

// hookLab backs up one mem VM with hooks; host hooks append
// "<phase> <hook> <vm>" to a log file.
type hookLab struct {
	t    *testing.T
	r    *repo.Repository
	c    *agentConn
	log  string
	disk func() []byte
}

func newHookLab(t *testing.T) *hookLab {
	c := &agentConn{memConnector: newMem(map[string]int{"vda": 1 << 20})}
	return &hookLab{t: t, r: newRepo(t, repo.InitOptions{}), c: c, log: filepath.Join(t.TempDir(), "hooks.log"),
		disk: func() []byte { return copyDisks(c.memConnector)["vda"] }}
}

// host is a host command that logs its phase, hook and VM.
func (l *hookLab) host(extra string) []string {
	return []string{"/bin/sh", "-c", `echo "$COFFER_PHASE $COFFER_HOOK $COFFER_VM" >> ` + l.log + extra}
}

func (l *hookLab) backup(hooks ...backup.Hook) (*repo.Point, error) {
	return backuptest.BackupVM(l.t, l.r, l.c, backup.VMRequest{Connection: "lab", VM: hypervisor.VMRef{ID: "vm-1", Name: "one"},
		SnapshotMode: hypervisor.CrashConsistent, Hooks: hooks})
}

func (l *hookLab) hostLog() string {
	b, _ := os.ReadFile(l.log)
	return string(b)
}

// TestHooksRunAroundTheSnapshot: pre commands run in order before the
// snapshot instant (the point holds what they wrote), post commands in
// reverse order after it (the point does not), host and guest alike, and
// the point records that its hooks succeeded.
func TestHooksRunAroundTheSnapshot(t *testing.T) {
	l := newHookLab(t)
	s, err := l.backup(
		backup.Hook{Name: "app", Pre: l.host(""), Post: l.host("")},
		backup.Hook{Name: "db", InGuest: true, Pre: []string{"mark", "PRE-SNAPSHOT"}, Post: []string{"mark", "POST-SNAPSHOT"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if s.Hooks != backup.HooksOK {
		t.Fatalf("point records hooks %q, warnings %q", s.Hooks, s.Warnings)
	}
	if got := l.hostLog(); got != "pre app one\npost app one\n" {
		t.Fatalf("host hooks ran as:\n%s", got)
	}
	if live := l.disk(); !strings.HasPrefix(string(live), "POST-SNAPSHOT") {
		t.Fatalf("the post hook did not run: the disk starts %q", live[:16])
	}
	want := make([]byte, 1<<20)
	copy(want, "PRE-SNAPSHOT")
	checkPoint(t, l.r, s, map[string][]byte{"vda": want}) // the pre hook's write, not the post hook's
	stored, err := l.r.LoadPoint(context.Background(), s.ID)
	if err != nil || stored.Hooks != backup.HooksOK {
		t.Fatalf("manifest records hooks %q (%v)", stored.Hooks, err)
	}
}

// TestFailedHooks: a failing pre command makes a point that says it is not
// application-consistent, or no point when the hook is required; a post
// command runs for every hook whose pre phase was reached, even when the
// snapshot or a required hook failed; a command past its timeout is
// killed and counts as failed.
func TestFailedHooks(t *testing.T) {
	t.Run("continue", func(t *testing.T) {
		l := newHookLab(t)
		s, err := l.backup(backup.Hook{Name: "app", Post: l.host("")},
			backup.Hook{Name: "db", InGuest: true, Pre: []string{"fail"}, Post: []string{"mark", "POST"}})
		if err != nil {
			t.Fatal(err)
		}
		if s.Hooks != backup.HooksPreFailed || !strings.Contains(strings.Join(s.Warnings, "\n"), "pre-snapshot hook db (guest) failed; the point is not application-consistent") {
			t.Fatalf("point records hooks %q, warnings %q", s.Hooks, s.Warnings)
		}
		if l.hostLog() != "post app one\n" || !strings.HasPrefix(string(l.disk()), "POST") {
			t.Fatalf("post hooks: host %q, guest wrote %q", l.hostLog(), l.disk()[:4])
		}
	})
	t.Run("required", func(t *testing.T) {
		l := newHookLab(t)
		_, err := l.backup(
			backup.Hook{Name: "first", Pre: l.host(""), Post: l.host("")},
			backup.Hook{Name: "db", Pre: l.host("; exit 3"), Post: l.host(""), Required: true},
			backup.Hook{Name: "never", Pre: l.host(""), Post: l.host("")},
		)
		if err == nil || !strings.Contains(err.Error(), "pre-snapshot hook db (host) failed, and the policy requires it") {
			t.Fatalf("backup with a failed required hook: %v", err)
		}
		if got := l.hostLog(); got != "pre first one\npre db one\npost db one\npost first one\n" {
			t.Fatalf("hooks ran as:\n%s", got)
		}
		if snaps, _ := l.r.Points(context.Background(), nil); len(snaps) != 0 || len(l.c.closed) != 0 {
			t.Fatalf("%d points and %d sessions after a failed required hook", len(snaps), len(l.c.closed))
		}
	})
	t.Run("snapshot fails", func(t *testing.T) {
		l := newHookLab(t)
		l.c.snapshotErr = errors.New("no space for the snapshot")
		if _, err := l.backup(backup.Hook{Name: "app", Pre: l.host(""), Post: l.host("")}); err == nil {
			t.Fatal("backup succeeded without a snapshot")
		}
		if l.hostLog() != "pre app one\npost app one\n" {
			t.Fatalf("hooks ran as:\n%s", l.hostLog())
		}
	})
	t.Run("timeout", func(t *testing.T) {
		l := newHookLab(t)
		s, err := l.backup(
			backup.Hook{Name: "slow", Pre: []string{"/bin/sh", "-c", "sleep 60"}, Timeout: 1},
			backup.Hook{Name: "stuck", InGuest: true, Post: []string{"hang"}, Timeout: 1},
		)
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(s.Warnings, "\n")
		if s.Hooks != backup.HooksPreFailed || !strings.Contains(all, "did not finish in time and was killed") ||
			!strings.Contains(all, "post-snapshot hook stuck (guest) failed") {
			t.Fatalf("point records hooks %q, warnings:\n%s", s.Hooks, all)
		}
	})
	t.Run("no guest agent", func(t *testing.T) {
		l := newHookLab(t)
		s, err := backuptest.BackupVM(t, l.r, l.c.memConnector, backup.VMRequest{Connection: "lab", VM: hypervisor.VMRef{ID: "vm-1", Name: "one"},
			Hooks: []backup.Hook{{Name: "db", InGuest: true, Pre: []string{"mark", "x"}}}})
		if err != nil || s.Hooks != backup.HooksPreFailed || !strings.Contains(strings.Join(s.Warnings, " "), "cannot run commands in guests") {
			t.Fatalf("guest hook without an agent: %v, hooks %q, warnings %q", err, s.Hooks, s.Warnings)
		}
	})
}
