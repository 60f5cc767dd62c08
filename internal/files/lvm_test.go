package files

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/files/filestest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestLVMLinearVolume builds a real LVM2 physical volume with the LVM tools
// (on a loop device: pvcreate/vgcreate need a block device), adds a linear
// logical volume through vgcfgrestore (lvcreate needs device-mapper, which
// this machine lacks; the on-disk metadata is still written by LVM itself),
// places an ext4 filesystem in it, and reads files through coffer.
func TestLVMLinearVolume(t *testing.T) {
	testutil.RequireRoot(t)
	for _, b := range []string{"losetup", "pvcreate", "vgcreate", "vgcfgbackup", "vgcfgrestore", "vgremove"} {
		testutil.RequireBinary(t, b)
	}
	tree, files := filestest.SourceTree(t, false)
	fsImg := filestest.Ext4(t, tree, 24)
	pvImg := filepath.Join(t.TempDir(), "pv.img")
	filestest.SparseFile(t, pvImg, 64<<20)
	// A second partition with a filesystem of its own: the LV is then one
	// of several volumes, reached as /lvm:VG-LV/...
	disk := filestest.Partitioned(t, true, pvImg, filestest.Ext4(t, filestest.Tree(t, spacedFiles), 8))
	out, err := exec.Command("losetup", "--find", "--show", "--partscan", disk).CombinedOutput()
	if err != nil {
		if testutil.Strict() {
			t.Fatalf("losetup: %v %s", err, out)
		}
		t.Skipf("no loop devices: %s", out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	// The PV goes on the partition; partscan may not create the node in a
	// container, so map the partition with a second loop device at its offset.
	part, err := exec.Command("losetup", "--find", "--show", "--offset", fmt.Sprint(1<<20), "--sizelimit", fmt.Sprint(64<<20), disk).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup partition: %v %s", err, part)
	}
	pdev := strings.TrimSpace(string(part))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", pdev).Run() })
	vg := fmt.Sprintf("cofvg%d", os.Getpid())
	lvmEnv := append(os.Environ(), "LVM_SUPPRESS_FD_WARNINGS=1")
	lvm := func(args ...string) string {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = lvmEnv
		o, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, o)
		}
		return string(o)
	}
	lvm("pvcreate", "-q", "-ff", "-y", pdev)
	lvm("vgcreate", "-q", "-s", "4M", vg, pdev)
	t.Cleanup(func() {
		cmd := exec.Command("vgremove", "-f", "-q", vg)
		cmd.Env = lvmEnv
		_ = cmd.Run()
	})
	meta := filepath.Join(t.TempDir(), "vg.txt")
	lvm("vgcfgbackup", "-q", "-f", meta, vg)
	raw, _ := os.ReadFile(meta)
	text := string(raw)
	// Add a linear LV of 6 extents starting at PV extent 2.
	lv := `
	logical_volumes {
		data {
			id = "aaaaaa-bbbb-cccc-dddd-eeee-ffff-gggggg"
			status = ["READ", "WRITE", "VISIBLE"]
			flags = []
			segment_count = 1
			segment1 {
				start_extent = 0
				extent_count = 6
				type = "striped"
				stripe_count = 1
				stripes = [
					"pv0", 2
				]
			}
		}
	}
`
	i := strings.LastIndex(text, "}") // the VG section closes last
	text = text[:i] + lv + text[i:]
	_ = os.WriteFile(meta, []byte(text), 0o600)
	lvm("vgcfgrestore", "-q", "-f", meta, vg)
	// Write the filesystem where the LV lives: pe_start + 2 extents.
	peStart := int64(1 << 20)
	if m := regexp.MustCompile(`pe_start = (\d+)`).FindStringSubmatch(text); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		peStart = n * 512
	}
	lvOff := int64(1<<20) + peStart + 2*4<<20
	filestest.Run(t, "dd", "if="+fsImg, "of="+disk, "bs=1M", fmt.Sprintf("seek=%d", lvOff>>20), "conv=notrunc", "status=none")
	r, size := throughRepository(t, disk)
	d, err := Open(r, size)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range d.Volumes() {
		names = append(names, v.Name+"="+v.Type)
	}
	want := "lvm:" + vg + "-data=ext4"
	if !strings.Contains(strings.Join(names, " "), want) {
		t.Fatalf("volumes %v, want %s", names, want)
	}
	root, err := d.Root()
	if err != nil {
		t.Fatal(err)
	}
	lvPath := "/lvm:" + vg + "-data"
	checkTree(t, root, lvPath, files, keeps{owner: true, mode: true, mtime: true, links: true, dirs: true})
	checkTree(t, root, "/2", spacedFiles, keeps{mode: true, mtime: true, dirs: true})
	checkReachable(t, root)
	dst := t.TempDir()
	st, err := Extract(context.Background(), root, []string{lvPath + "/etc/app", "/2/a dir/sub dir"}, dst)
	if err != nil || st.Files != 2 || len(st.Skipped) != 0 {
		t.Fatalf("extract from the LV: %+v %v", st, err)
	}
	for name, want := range map[string]string{"app/config.yaml": "key: value\n", "sub dir/deep file.txt": "deep\n"} {
		if got, err := os.ReadFile(filepath.Join(dst, name)); err != nil || string(got) != want {
			t.Errorf("%s: %q %v", name, got, err)
		}
	}
}

func TestLVMConfigParser(t *testing.T) {
	sec, err := parseLVMConfig([]byte(`# comment
vg0 {
	id = "x"
	extent_size = 8192
	physical_volumes { pv0 { pe_start = 2048 } }
	tags = ["a", "b"]
}`))
	if err != nil {
		t.Fatal(err)
	}
	vg := sec["vg0"].(lvmSection)
	if vg.int("extent_size") != 8192 || vg["physical_volumes"].(lvmSection)["pv0"].(lvmSection).int("pe_start") != 2048 {
		t.Fatalf("parsed %+v", sec)
	}
	for _, bad := range []string{"vg {", "vg { a = ", "}", `vg { a = "x }`, strings.Repeat("a {", 40)} {
		if _, err := parseLVMConfig([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzLVMConfig(f *testing.F) {
	f.Add([]byte(`vg { a = 1 b = "x" c = [1, "y"] d { e = 2 } }`))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = parseLVMConfig(b) })
}
