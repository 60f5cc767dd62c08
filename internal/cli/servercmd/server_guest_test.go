package servercmd_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/instant"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestQEMUGuestThroughTheAPI: a real QEMU guest is backed up, restored and
// instantly recovered through the REST API of `coffer server` running as a
// process, with API tokens, on a SQLite catalog and on a PostgreSQL one.
// The tokens split the work as the roles do: a BackupOperator's backs up
// and cannot restore, a RestoreOperator's restores and recovers and cannot
// back up. The restored disk passes the guest's own block check; the
// recovered VM checks its disk read from the backup, keeps writing, and
// goes on running from the restore directory once committed; the jobs are
// the catalog's, recorded as the tokens' user's.
func TestQEMUGuestThroughTheAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	guest := clitest.BootWriters(t, ctx, t.TempDir(), 1)[0]
	for _, catalog := range []string{"sqlite", "postgres"} {
		t.Run(catalog, func(t *testing.T) {
			e := clitest.NewEnv(t)
			if catalog == "postgres" {
				e.Vars["COFFER_CATALOG"] = testutil.StartPostgres(t)
			}
			e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state")
			e.Config(fmt.Sprintf("connections:\n  - {name: kvm1, kind: qemu, options: {sockets: [%q]}}\n", guest.QMPPath))
			e.Must("init")
			s := e.StartServer()
			token := func(role string) string {
				return strings.TrimSpace(e.Must("token", "create", "--user", "admin", "--grant", "/="+role))
			}
			backupOp, restoreOp := token("BackupOperator"), token("RestoreOperator")
			must := func(tok, method, path string, body any, want int, out any) {
				t.Helper()
				if code, _ := s.Call(tok, method, path, body, out); code != want {
					t.Fatalf("%s %s: %d, want %d\n%s", method, path, code, want, s.Log())
				}
			}

			backupVM := "/repositories/default/backups/vm/kvm1/" + guest.Opts.Name
			var point api.BackupPoint
			must(backupOp, "POST", backupVM, map[string]any{}, http.StatusOK, &point)
			if point.VM != guest.Opts.Name || point.Connection != "kvm1" || point.ID == "" {
				t.Fatalf("backed up %+v", point)
			}
			must(restoreOp, "POST", backupVM, map[string]any{}, http.StatusForbidden, nil)
			restore := "/repositories/default/points/" + point.ID + "/restore"
			must(backupOp, "POST", restore, map[string]any{"to": "stolen.raw"}, http.StatusForbidden, nil)

			var restored []api.RestoredDisk
			must(restoreOp, "POST", restore, map[string]any{"to": "web.raw"}, http.StatusOK, &restored)
			f, err := os.Open(filepath.Join(e.Vars["COFFER_STATE_DIR"], "restores", "web.raw"))
			if err != nil || len(restored) != 1 || restored[0].PointID != point.ID {
				t.Fatalf("restore: %+v %v", restored, err)
			}
			rep, err := guestvm.CheckDisk(f, restored[0].SizeBytes)
			f.Close()
			if err != nil || rep.Base != 64 {
				t.Fatalf("the restored disk: %+v %v", rep, err)
			}

			var sess api.InstantSession
			must(restoreOp, "POST", "/repositories/default/points/"+point.ID+"/instant", map[string]any{}, http.StatusCreated, &sess)
			t.Cleanup(func() { _ = qemu.Quit(context.Background(), sess.QMPSocket) })
			pos := clitest.WaitFile(ctx, t, sess.Console, 0, "COFFER CHECK OK base=64")
			clitest.WaitFile(ctx, t, sess.Console, pos, "COFFER WROTE")
			must(restoreOp, "POST", "/instant/"+sess.ID+"/commit", map[string]any{"to": "recovered", "format": "raw"}, http.StatusOK, &sess)
			if sess.State != instant.StateCommitted || len(sess.Targets) != 1 || !strings.HasPrefix(sess.Targets[0], filepath.Join(e.Vars["COFFER_STATE_DIR"], "restores")) {
				t.Fatalf("committed %+v", sess)
			}
			b, _ := os.ReadFile(sess.Console)
			clitest.WaitFile(ctx, t, sess.Console, len(b), "COFFER WROTE") // running from the committed disk

			var jobs []api.Job
			must(restoreOp, "GET", "/jobs?user=admin", nil, http.StatusOK, &jobs)
			done := map[string]bool{}
			for _, j := range jobs {
				done[j.Kind] = done[j.Kind] || (j.User == "admin" && j.Status == "success")
			}
			if !done["backup-vm"] || !done["restore"] || !done["instant"] { // the commit is the instant recovery's job
				t.Fatalf("the API's operations are not the admin's finished jobs: %+v", jobs)
			}
		})
	}
}
