package repocmd_test

import (
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

var repoServingRE = regexp.MustCompile(`coffer repository serve: serving \S+ at (https://\S+)`)

// storageHost is a repository directory, initialised on its host, and
// the `coffer repository serve` process that serves it.
type storageHost struct {
	*clitest.Env
	credentials string
	srv         *clitest.ServerProc
}

func newStorageHost(t *testing.T) *storageHost {
	h := &storageHost{Env: clitest.NewEnv(t)}
	h.Must("init", "--pack-size", "1MiB")
	h.credentials = filepath.Join(h.Dir, "credentials.yaml")
	return h
}

// client adds a credential of right and returns an env that reaches the
// repository through the server with it (serve sets its URL).
func (h *storageHost) client(t *testing.T, name, right string) *clitest.Env {
	secret := strings.TrimSpace(h.Must("repository", "credential", "add", name, "--right", right, "--credentials", h.credentials))
	c := clitest.NewEnv(t)
	c.Vars["COFFER_REPO_CREDENTIAL"] = secret
	c.Vars["COFFER_REPO_CA_FILE"] = h.Repo + ".tls/tls.crt"
	c.Vars["COFFER_CACHE_DIR"] = filepath.Join(c.Dir, "cache")
	return c
}

// serve starts the server (a real coffer process) and points c at it.
func (h *storageHost) serve(c *clitest.Env) {
	ready := func(s *clitest.ServerProc) bool { return repoServingRE.MatchString(s.Stderr.String()) }
	h.srv = h.StartCoffer(ready, time.Minute, "repository", "serve", "--dir", h.Repo, "--credentials", h.credentials,
		"--listen", "127.0.0.1:0", "--allow-root")
	url := repoServingRE.FindStringSubmatch(h.srv.Log())[1]
	c.Repo, c.Vars["COFFER_REPO"] = url, url
}

// kill ends the server with SIGKILL.
func (h *storageHost) kill() {
	_ = h.srv.Cmd.Process.Kill()
	<-h.srv.Done
}

// TestKillNineOfTheRepositoryServer kills the repository server (not the
// client) at random instants of a backup through it: after each kill the
// restarted server serves a repository that verifies, and the last,
// complete run stores no chunk twice and restores bit-identical.
func TestKillNineOfTheRepositoryServer(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop")
	}
	host, probeHost := newStorageHost(t), newStorageHost(t)
	c, probe := host.client(t, "backup", "append"), probeHost.client(t, "backup", "append")
	img := c.Image("vm.img", 96<<20, 40)
	probeHost.serve(probe)
	start := time.Now()
	probe.Must("backup", "disk", img, "--name", "vm")
	window := time.Since(start)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	kills, want := 0, soakRounds(5)
	for round := 0; kills < want; round++ {
		if round > 4*want {
			t.Fatalf("only %d of %d backups saw their server killed (a full backup takes %v)", kills, round, window)
		}
		host.serve(c)
		d := time.Duration(rng.Int64N(int64(window))) + time.Millisecond
		backup := c.Child("backup", "disk", img, "--name", "vm")
		if err := backup.Start(); err != nil {
			t.Fatal(err)
		}
		killer := time.AfterFunc(d, host.kill)
		err := backup.Wait()
		if killer.Stop() { // the backup ended first
			if err != nil {
				t.Fatalf("round %d: the backup failed with its server up: %v", round, err)
			}
			host.kill()
			window = max(d/2, time.Millisecond)
		} else {
			kills++
		}
		host.serve(c)
		c.Must("verify", "--read-data")
		host.kill()
		t.Logf("round %d: server killed after %v (backup: %v)", round, d, err)
	}
	host.serve(c)
	c.Must("backup", "disk", img, "--name", "vm")
	c.Must("verify", "--read-data")
	s := repoStats(t, c)
	if s.PackBytes > s.Unique+s.Unique/20+64<<10 {
		t.Fatalf("packs hold %d bytes for %d unique bytes: chunks of the cut runs were stored again", s.PackBytes, s.Unique)
	}
	out := filepath.Join(c.Dir, "restored.img")
	c.Must("restore", "latest", "--to", out)
	if !clitest.SameFile(t, out, img) {
		t.Fatal("restored image differs")
	}
	t.Logf("%d servers killed mid-backup; packs %d bytes for %d unique", kills, s.PackBytes, s.Unique)
}
