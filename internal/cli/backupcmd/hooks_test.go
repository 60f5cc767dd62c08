package backupcmd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// TestPolicyHooks: a policy's hooks run around each VM's snapshot through
// the engine, only for the VMs they select, and every point and listing
// says how they went.
func TestPolicyHooks(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	log, other := filepath.Join(e.Dir, "hooks.log"), filepath.Join(e.Dir, "other.log")
	e.Config(`
connections:
  - {name: sim, kind: fake, options: {vms: 3, disk-size: 128KiB}}
policies:
  - name: app
    connection: sim
    hooks:
      - name: flush
        where: host
        pre: [/bin/sh, -c, 'echo "pre $COFFER_VM $COFFER_CONNECTION" >> ` + log + `']
        post: [/bin/sh, -c, 'echo "post $COFFER_VM" >> ` + log + `']
      - {name: none, where: host, vms: ["no-such-*"], pre: [/bin/sh, -c, 'echo x >> ` + other + `']}
`)
	e.Must("run", "app")
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	points := clitest.SnapshotsJSON(t, e)
	if len(points) != 3 || len(lines) != 6 {
		t.Fatalf("%d points, hook log:\n%s", len(points), b)
	}
	for _, p := range points {
		if p.Hooks != "ok" || !strings.Contains(string(b), "pre "+p.VM+" sim\n") || !strings.Contains(string(b), "post "+p.VM+"\n") {
			t.Errorf("point of %s: hooks %q; hook log:\n%s", p.VM, p.Hooks, b)
		}
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("a hook ran for VMs it does not select: %v", err)
	}
	if out := e.Must("snapshots"); !strings.Contains(out, "crash-consistent + hooks") {
		t.Errorf("the listing does not say the hooks succeeded:\n%s", out)
	}
}
