package rebuild_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog/rebuild"
)

const (
	helperRepoEnv   = "COFFER_TEST_KILLED_BACKUP_REPO"
	helperMarkerEnv = "COFFER_TEST_KILLED_BACKUP_MARKER"
)

// A backup process killed with SIGKILL after writing its data but before
// its manifest leaves no point behind: the rebuilt catalog lists only
// committed points, and the next backup and rebuild work normally.
func TestRebuildAfterKilledBackup(t *testing.T) {
	ctx := context.Background()
	loc := newRepo(t)
	r := openRepo(t, loc, nil)
	first := mustBackup(t, r, "a", nil, nil)

	marker := filepath.Join(t.TempDir(), "about-to-commit")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBackupKilledBeforeCommit$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperRepoEnv+"="+loc, helperMarkerEnv+"="+marker)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(2 * time.Minute)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("helper exited before reaching the commit: %v\n%s", err, out.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("helper did not reach the commit\n%s", out.String())
		case <-time.After(10 * time.Millisecond): // polling interval
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited

	c := openCatalog(t)
	res, err := rebuild.Rebuild(ctx, c, openRepo(t, loc, nil))
	if err != nil || res.Points != 1 || len(res.Skipped) != 0 {
		t.Fatalf("rebuild after a killed backup = %+v, %v", res, err)
	}
	if ps := points(t, c, res.Repository); ps[0].ID != first.ID.String() {
		t.Fatalf("points %+v", ps)
	}
	r2 := openRepo(t, loc, nil)
	second := mustBackup(t, r2, "killed", nil, nil)
	res, err = rebuild.Rebuild(ctx, c, r2)
	if err != nil || res.Points != 2 {
		t.Fatalf("rebuild after the next backup = %+v, %v", res, err)
	}
	if ps := points(t, c, res.Repository); ps[0].ID != second.ID.String() {
		t.Fatalf("points %+v", ps)
	}
}

// TestHelperBackupKilledBeforeCommit is the process the test above kills.
func TestHelperBackupKilledBeforeCommit(t *testing.T) {
	loc, marker := os.Getenv(helperRepoEnv), os.Getenv(helperMarkerEnv)
	if loc == "" {
		t.Skip("helper process of TestRebuildAfterKilledBackup")
	}
	r := openRepo(t, loc, nil)
	_, err := backupDisk(context.Background(), r, "killed", nil, func(req *backup.Request) {
		req.BeforeCommit = func() error {
			if err := os.WriteFile(marker, nil, 0o600); err != nil {
				return err
			}
			time.Sleep(time.Minute) // killed long before this ends
			return errors.New("not killed")
		}
	})
	t.Fatalf("backup returned: %v", err)
}

// lockedBuffer collects a child's output from two copying goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
