package qemu

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// fileSource is a disk that writes a marker file (the service's restores
// it into a real image).
type fileSource struct {
	hypervisor.DiskSource
	formats map[string]string // path -> format asked
}

func (f *fileSource) WriteFile(_ context.Context, path, format string) error {
	f.formats[path] = format
	return os.WriteFile(path, []byte("disk"), 0o600)
}

// TestDirRestorerWritesFilesAndScript: a VM restored into a directory gets
// its disks and memory state as files there, in the format asked, and a
// launch script starting the recorded machine on them under its new name;
// a source that cannot write files is refused.
func TestDirRestorerWritesFilesAndScript(t *testing.T) {
	native, _ := json.Marshal(nativeConfig{
		CmdLine: []string{"/nonexistent/qemu-system-x86_64", "-name", "web-1", "-uuid", "6b1d3c0e-0000-4000-8000-000000000001", "-m", "512",
			"-drive", "file=/vm/web-1.qcow2,format=qcow2,if=virtio,id=vda"},
		Disks: []blockDisk{{ID: "vda", Node: "#block1", Format: "qcow2", File: "/vm/web-1.qcow2"}},
	})
	dir := filepath.Join(t.TempDir(), "new")
	ctx := context.Background()
	var r hypervisor.Restorer = DirRestorer{}
	nv, err := r.CreateVM(ctx, hypervisor.VMConfig{Kind: "qemu", Name: "web-1", Native: native},
		hypervisor.NewVMOptions{Name: "web-1-restored", TargetDir: dir, DiskFormat: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	if err := nv.WriteDisk(ctx, "vda", nil); err == nil {
		t.Fatal("a source that cannot write a file was accepted")
	}
	src := &fileSource{formats: map[string]string{}}
	if err := nv.WriteDisk(ctx, "vda", src); err != nil {
		t.Fatal(err)
	}
	if err := nv.(hypervisor.MemoryWriter).WriteMemory(ctx, src); err != nil {
		t.Fatal(err)
	}
	if err := nv.(hypervisor.Completer).Complete(ctx); err != nil {
		t.Fatal(err)
	}
	f := nv.(*dirVM).Files()
	disk, memory := filepath.Join(dir, "vda.raw"), filepath.Join(dir, "memory.vmstate")
	if f.Dir != dir || len(f.Disks) != 1 || f.Disks[0] != disk || f.MemoryState != memory || f.QMPSocket != filepath.Join(dir, "qmp.sock") ||
		src.formats[disk] != "raw" || src.formats[memory] != "raw" {
		t.Fatalf("files %+v, written %v", f, src.formats)
	}
	script, err := os.ReadFile(f.LaunchScript)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"'-name' 'web-1-restored'", "file=" + disk + ",format=raw", "'-uuid' '" + nv.Ref().ID + "'"} {
		if !strings.Contains(string(script), want) {
			t.Errorf("launch script lacks %q:\n%s", want, script)
		}
	}
	if strings.Contains(string(script), "-incoming") || strings.Contains(string(script), "/vm/web-1.qcow2") || strings.Contains(string(script), "6b1d3c0e") {
		t.Errorf("launch script does not boot on the restored disk:\n%s", script)
	}
}
