package backupcmd_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// TestVSphereRestoreWithMemoryPoint backs up a running VM with a
// `snapshot: with-memory` policy: the point holds the snapshot's .vmsn as
// a memory stream next to the disk (vcsim writes it empty; its content is
// tested in the vsphere package). `restore vm --connection` restores the
// disk only and says so; `coffer restore` writes the memory stream out
// like a disk, alone (--disk) or with the disk into a directory.
func TestVSphereRestoreWithMemoryPoint(t *testing.T) {
	srv := vclab.Start(t, 1, 1)
	lab := clitest.NewVCLab(t, srv)
	vm := lab.VMs[0]
	orig := lab.Disk(vm.Name)
	want := bytes.Repeat([]byte("memory point "), int(orig.Size)/13+1)[:orig.Size]
	lab.WriteFlat(orig, want)
	lab.Power(vm, true)

	e := clitest.NewEnv(t)
	e.Must("init")
	lab.BackUp(e, vm.Name, "with-memory")

	res := lab.RestoreLatest(e)
	if len(res.Disks) != 1 || !strings.Contains(strings.Join(res.Warnings, ";"), "memory state") {
		t.Fatalf("restore vm: %+v", res)
	}
	if got := lab.ReadFlat(lab.Disk(res.VM)); !bytes.Equal(got, want) {
		t.Fatal("the new VM's disk differs from the original's at backup time")
	}

	vmsn := vm.Name + "-Snapshot1.vmsn"
	one := filepath.Join(e.Dir, "memory.vmsn")
	e.Must("restore", "latest", "--disk", "memory-vmsn", "--to", one)
	if fi, err := os.Stat(one); err != nil || fi.Size() != 0 {
		t.Fatalf("restore --disk memory-vmsn: %v %v", fi, err)
	}
	dir := filepath.Join(e.Dir, "all")
	e.Must("restore", "latest", "--to", dir)
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, en := range ents {
		names = append(names, en.Name())
	}
	if len(names) != 2 || !strings.HasSuffix(names[1], "-"+vmsn) {
		t.Fatalf("restore into a directory: %v, want the disk and ...-%s", names, vmsn)
	}
	for _, n := range names {
		if b, _ := os.ReadFile(filepath.Join(dir, n)); !strings.HasSuffix(n, ".vmsn") && !bytes.Equal(b, want) {
			t.Fatalf("%s differs from the disk at backup time", n)
		}
	}
}
