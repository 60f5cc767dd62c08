package restorecmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/instant"
)

// TestInstantRecoveryOnLibvirt backs up a writing guest under a private
// libvirtd, destroys it (the disaster) and runs its point with `coffer
// instant start` as a new domain of the connection, on overlays backed by
// coffer's NBD export; its guest verifies the disk it reads from the
// backup. `instant commit --to POOL` moves it live into the pool with
// libvirt's block copy: the serving process exits, the domain goes on
// writing on local files, and `instant discard` then leaves it running.
func TestInstantRecoveryOnLibvirt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g := clitest.StartLibvirtGuest(t, ctx)
	g.Wait("COFFER READY", 0)
	vmDir := filepath.Dir(g.Disk)
	g.Virsh("pool-create-as", "images", "dir", "--target", vmDir)

	e := clitest.NewEnv(t)
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state")
	e.Must("init")
	e.Config(fmt.Sprintf(`
state-dir: %s
connections:
  - name: lv
    kind: libvirt
    options: {uri: "%s", state-dir: %s}
policies:
  - {name: local, connection: lv, select: {names: ["web-*"]}}
`, filepath.Join(e.Dir, "state"), g.D.URI, filepath.Join(g.D.Dir, "st")))
	e.Must("run", "local")
	g.Virsh("destroy", "web-1")

	server := e.Child("instant", "start", "latest", "--name", "web-1-dr", "--json")
	out, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	server.Stderr = os.Stderr
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	var s api.InstantSession
	if err := json.NewDecoder(out).Decode(&s); err != nil || s.Domain != "web-1-dr" || s.Connection != "lv" || len(s.Disks) != 1 {
		t.Fatalf("instant start: %+v %v", s, err)
	}
	at := g.Wait("COFFER CHECK OK", 0) // the new domain's console starts afresh
	if b, _ := os.ReadFile(filepath.Join(vmDir, "console.log")); strings.Contains(string(b[:at]), "COFFER FAIL") {
		t.Fatalf("recovered guest:\n%s", b)
	}
	if xml := g.Virsh("dumpxml", "web-1-dr"); !strings.Contains(xml, "protocol='nbd'") || !strings.Contains(xml, s.Disks[0].Overlay) {
		t.Fatalf("the recovered domain does not run from the backup:\n%s", xml)
	}
	var list []api.InstantSession
	if err := json.Unmarshal([]byte(e.Must("instant", "list", "--json")), &list); err != nil || len(list) != 1 ||
		list[0].State != instant.StateRunning || !list[0].ServerRunning || !list[0].VMRunning || list[0].DomainID != s.DomainID {
		t.Fatalf("instant list: %+v %v", list, err)
	}

	e.Must("instant", "commit", s.ID, "--to", "images")
	if err := server.Wait(); err != nil {
		t.Fatalf("the server did not stop cleanly after the commit: %v", err)
	}
	at = g.Wait("COFFER WROTE", at) // writing on, nothing served
	if st := strings.TrimSpace(g.Virsh("domstate", "web-1-dr")); st != "running" {
		t.Fatalf("after the commit the domain is %s", st)
	}
	xml := g.Virsh("dumpxml", "web-1-dr")
	if strings.Contains(xml, "nbd") || !strings.Contains(xml, filepath.Join(vmDir, "web-1-dr-vda.qcow2")) {
		t.Fatalf("the committed domain:\n%s", xml)
	}
	if _, err := os.Stat(s.Disks[0].Overlay); !os.IsNotExist(err) {
		t.Fatalf("overlay left after the commit: %v", err)
	}
	if err := json.Unmarshal([]byte(e.Must("instant", "list", "--json")), &list); err != nil || len(list) != 1 ||
		list[0].State != instant.StateCommitted || list[0].ServerRunning || !list[0].VMRunning {
		t.Fatalf("instant list after commit: %+v %v", list, err)
	}
	e.Must("instant", "discard", s.ID)
	g.Wait("COFFER WROTE", at)
	if st := strings.TrimSpace(g.Virsh("domstate", "web-1-dr")); st != "running" {
		t.Fatalf("discarding the committed session left the domain %s", st)
	}
	if out := e.Must("instant", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("instant list after discard: %s", out)
	}
}
