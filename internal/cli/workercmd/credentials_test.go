package workercmd_test

import (
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestWorkerNeedsItsOwnCredential: a worker given the servers' catalog
// credentials (COFFER_CATALOG's) is refused, told how to make its token;
// a --catalog that logs in as the worker's own role (its token written
// out) is its credential; --insecure-catalog-credentials lets it use the
// servers', warning that it is for tests only.
func TestWorkerNeedsItsOwnCredential(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	out := e.Expect(2, "worker", "--name", "kvm1")
	if !strings.Contains(out, "coffer workers token create NAME") || !strings.Contains(out, "--insecure-catalog-credentials") {
		t.Fatalf("the refusal does not say how to make a token: %s", out)
	}

	login := e.WorkerLogin("kvm1") // --catalog ADDRESS --token-file FILE
	token, err := os.ReadFile(login[3])
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.SplitN(strings.TrimSpace(string(token)), ".", 3)[2]
	own, err := url.Parse(e.CatalogAddress())
	if err != nil {
		t.Fatal(err)
	}
	own.User = url.UserPassword("coffer_worker_kvm1", secret)
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	w := e.StartCoffer(registered, patience, "worker", "--catalog", own.String(), "--slots", "1", "--log-level", "info")
	if !strings.Contains(w.Log(), "worker=kvm1") || strings.Contains(w.Log(), "catalog's own credentials") {
		t.Errorf("the worker logging in as its role:\n%s", w.Log())
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}

	w = e.StartCoffer(registered, patience, "worker", "--name", "kvm2", "--slots", "1", "--insecure-catalog-credentials", "--log-level", "info")
	if !strings.Contains(w.Log(), "for tests only") {
		t.Errorf("a worker with the servers' credentials does not warn:\n%s", w.Log())
	}
}
