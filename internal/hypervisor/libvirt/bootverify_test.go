package libvirt_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/bootverify"
	"github.com/coffer-backup/coffer/internal/repo"
)

// checkBootVerification boots a point of the lab's domain as boot
// verification boots QEMU points: its recorded domain XML mapped to a
// QEMU machine (the host's kernel, vda and vdb on virtio, the guest
// agent's channel), isolated, under TCG; every step of the ladder passes,
// with the mapping as step 1's evidence, and nothing is left behind.
func (l *lab) checkBootVerification(t *testing.T, p *repo.Point) {
	state, err := os.MkdirTemp("", "bv") // short: unix socket paths are bounded
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	began := time.Now()
	res, err := bootverify.Run(l.ctx, l.repos[p.Tags["chain"]], p, bootverify.Options{StateDir: state, Marker: "COFFER READY",
		Timeout: 2 * time.Minute, ProbeTimeout: 20 * time.Second,
		Probes: []bootverify.Probe{{Kind: bootverify.ProbeExec, Command: []string{"/bin/true"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, s := range res.Steps {
		steps = append(steps, s.Name+" "+s.Status+": "+s.Detail)
	}
	if !res.Passed || len(res.Steps) != 6 || len(res.Screenshot) == 0 {
		t.Fatalf("boot verification of a libvirt point: passed %v, screenshot %d bytes\n%s\nconsole: %s",
			res.Passed, len(res.Screenshot), strings.Join(steps, "\n"), res.ConsoleTail)
	}
	for _, s := range res.Steps {
		t.Logf("step %d %s: %s in %s", s.Number, s.Name, s.Status, s.Duration.Round(time.Millisecond))
		if s.Status != bootverify.Passed {
			t.Fatalf("step %d %s: %s %s", s.Number, s.Name, s.Status, s.Detail)
		}
	}
	ev := res.Step(bootverify.StepStart).Evidence
	if ev["disks"] != "vda: virtio -> virtio-blk-pci; vdb: virtio -> virtio-blk-pci" || ev["boot_disk"] != "vda" ||
		!strings.HasPrefix(ev["kernel"], filepath.Join(l.dir, "vmlinuz")) || !strings.HasPrefix(ev["machine"], "pc ") {
		t.Fatalf("step 1's evidence: %v", ev)
	}
	t.Logf("booted in %s; step 1: %v; agent: %v", time.Since(began).Round(time.Millisecond), ev, res.Step(bootverify.StepAgent).Evidence)
	if left, _ := filepath.Glob(filepath.Join(bootverify.Root(state), "*")); len(left) != 0 {
		t.Fatalf("left in the state directory: %v", left)
	}
	if out, err := exec.Command("pgrep", "-f", bootverify.Root(state)).Output(); err == nil {
		t.Fatalf("QEMU still running from %s: %s", state, out)
	}
}
