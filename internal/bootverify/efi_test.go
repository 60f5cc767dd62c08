package bootverify

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/guestvm"
)

// TestEFIPoints: a guest that boots under UEFI (OVMF) from its own GPT
// disk, through the removable-media path \EFI\BOOT\BOOTX64.EFI of its EFI
// System Partition. Its good point passes the whole ladder; a point whose
// loader was zeroed (a failed update, a bad sector) fails at step 3 with
// a screenshot of the firmware's screen and nothing of the guest on the
// console. Neither the production disk nor the production VM's EFI
// variable store (which the backup carries as a disk of its own) changes.
func TestEFIPoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	l := newLabWith(t, ctx, efiBoot)
	if !strings.Contains(l.vm.Console(), "root file system mounted") {
		t.Fatalf("the guest did not mount its root file system:\n%s", l.vm.Console())
	}
	good := l.backup()
	l.write(fmt.Sprintf("write -z %d %d", l.efi.LoaderOffset, l.efi.LoaderSize))
	noLoader := l.backup()
	l.vm.Kill()
	prodDisk, prodVars := fileHash(t, l.disk), fileHash(t, filepath.Join(l.vm.Opts.Dir, "efivars.fd"))

	opts := Options{StateDir: l.state, Marker: guestvm.BootMarker, Timeout: 2 * time.Minute, ProbeTimeout: 30 * time.Second,
		Probes: []Probe{{Kind: ProbeHTTP, Port: guestvm.BootProbePort, Path: "/", Status: 200},
			{Kind: ProbeExec, Command: []string{"/bin/sh", "-c", "test -f /root/" + guestvm.RootMarkerFile}}}}
	res, err := Run(ctx, l.repo, good, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed || len(res.Steps) != 6 {
		t.Fatalf("the good point of an EFI guest failed:\n%s\n%s", statuses(res), res.ConsoleTail)
	}
	for _, s := range res.Steps {
		if s.Status != Passed {
			t.Fatalf("step %d %s: %s\n%s", s.Number, s.Name, s.Status, statuses(res))
		}
	}
	t.Logf("EFI guest, whole ladder: %.1f s (console marker %.1f s)", res.Duration.Seconds(),
		res.Step(StepConsole).Duration.Seconds())
	assertClean(t, l.state)

	short := opts
	short.Timeout, short.Probes = 60*time.Second, nil
	res, err = Run(ctx, l.repo, noLoader, short)
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed || res.FailedStep != StepConsole || res.Step(StepNoPanic).Status != Passed {
		t.Fatalf("zeroed loader: want a failure at step 3:\n%s\n%s", statuses(res), res.ConsoleTail)
	}
	if _, err := png.Decode(bytes.NewReader(res.Screenshot)); err != nil {
		t.Fatalf("zeroed loader: no screenshot attached: %v", err)
	}
	if strings.Contains(res.ConsoleTail, "COFFER") {
		t.Fatalf("zeroed loader: the guest's init ran although its loader is gone:\n%s", res.ConsoleTail)
	}
	assertClean(t, l.state)

	if fileHash(t, l.disk) != prodDisk {
		t.Fatal("the production VM's disk changed")
	}
	if fileHash(t, filepath.Join(l.vm.Opts.Dir, "efivars.fd")) != prodVars {
		t.Fatal("the production VM's EFI variable store changed")
	}
}
