package backupcmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// TestTwoChainsOnLibvirt drives a writing guest under a private libvirtd
// through the job engine with two policies to two repositories, run
// interleaved: each chain has checkpoints of its own (named after policy
// and repository, listed by virsh), each incremental reads less than its
// full, and the second chain's incremental, taken right after the first
// chain's, restores equal to the disk at its instant: it diffed against its
// own last point, not the other chain's.
func TestTwoChainsOnLibvirt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	g := clitest.StartLibvirtGuest(t, ctx)
	d, virsh, wait, disk := g.D, g.Virsh, g.Wait, g.Disk
	at := wait("COFFER READY", 0)

	e := clitest.NewEnv(t)
	e.Must("init")
	offsite := filepath.Join(e.Dir, "offsite")
	local := e.Vars["COFFER_REPO"]
	e.Vars["COFFER_REPO"] = offsite
	e.Must("init")
	e.Vars["COFFER_REPO"] = local
	e.Config(fmt.Sprintf(`
state-dir: %s
connections:
  - name: lv
    kind: libvirt
    options: {uri: "%s", state-dir: %s}
repositories:
  - {name: offsite, location: %s}
policies:
  - {name: local, connection: lv, select: {names: ["web-*"]}}
  - {name: nightly, connection: lv, repository: offsite, select: {names: ["web-*"]}}
`, filepath.Join(e.Dir, "state"), d.URI, filepath.Join(d.Dir, "st"), offsite))

	inv := clitest.VMsJSON(t, e)
	if len(inv) != 1 || inv[0].VM != "web-1" || inv[0].ProvisionedBytes != 32<<20 || len(inv[0].Policies) != 2 {
		t.Fatalf("vms: %+v", inv)
	}
	run := func(policy, wantMode string) api.VMTask {
		t.Helper()
		var res api.Job
		out := e.Must("run", policy, "--json")
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Status != "success" || len(res.Tasks) != 1 || res.Tasks[0].Mode != wantMode {
			t.Fatalf("run %s: %v %s", policy, err, out)
		}
		return res.Tasks[0]
	}
	fullLocal := run("local", "full")
	fullNightly := run("nightly", "full")
	wait("COFFER WROTE", at)
	incLocal := run("local", "incremental")
	if incLocal.ReadBytes >= fullLocal.ReadBytes {
		t.Fatalf("local incremental read %d bytes, its full %d", incLocal.ReadBytes, fullLocal.ReadBytes)
	}
	// nightly's incremental right after local's, with the guest paused:
	// only nightly's own checkpoint holds the writes before local's.
	virsh("suspend", "web-1")
	truth := filepath.Join(e.Dir, "truth.raw")
	if out, err := exec.Command("qemu-img", "convert", "-U", "-O", "raw", disk, truth).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	incNightly := run("nightly", "incremental")
	virsh("resume", "web-1")
	if incNightly.ReadBytes >= fullNightly.ReadBytes {
		t.Fatalf("nightly incremental read %d bytes, its full %d", incNightly.ReadBytes, fullNightly.ReadBytes)
	}
	e.Vars["COFFER_REPO"] = offsite
	restored := filepath.Join(e.Dir, "restored.raw")
	e.Must("restore", incNightly.PointID, "--to", restored)
	e.Vars["COFFER_REPO"] = local
	want, _ := os.ReadFile(truth)
	if got, _ := os.ReadFile(restored); !bytes.Equal(got, want) {
		t.Fatal("nightly's incremental differs from the disk at its instant")
	}
	cps := strings.Fields(virsh("checkpoint-list", "--name", "web-1"))
	var localCps, nightlyCps int
	for _, c := range cps {
		switch {
		case strings.HasPrefix(c, "coffer-local_default."):
			localCps++
		case strings.HasPrefix(c, "coffer-nightly_offsite."):
			nightlyCps++
		default:
			t.Errorf("checkpoint %s is no chain's", c)
		}
	}
	if localCps != 2 || nightlyCps != 2 { // each chain's full anchor and latest incremental
		t.Fatalf("checkpoints %v", cps)
	}

	// What libvirt cannot do is refused before a run.
	e.Config(fmt.Sprintf(`
connections:
  - {name: lv, kind: libvirt, options: {uri: "%s"}}
policies:
  - {name: mem, connection: lv, snapshot: with-memory}
`, d.URI))
	if out := e.Expect(command.ExitUsage, "policy", "check", "--offline"); !strings.Contains(out, "saves no memory state") {
		t.Fatalf("policy check of with-memory on libvirt: %s", out)
	}
}
