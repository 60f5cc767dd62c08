package failover

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestCloudInitSeedIsANoCloudDisk: the seed a plan's cloud-init
// directory becomes is a sound FAT file system labelled CIDATA (the
// label NoCloud looks for) holding each file of the directory as it is.
// No test guest runs cloud-init, so no guest reads it here.
func TestCloudInitSeedIsANoCloudDisk(t *testing.T) {
	for _, bin := range []string{"mkfs.vfat", "mcopy", "mtype", "mlabel", "fsck.vfat"} {
		testutil.RequireBinary(t, bin)
	}
	dir := t.TempDir()
	files := map[string]string{
		"meta-data":      "instance-id: web-01-dr\nlocal-hostname: web-01\n",
		"user-data":      "#cloud-config\nruncmd: [[touch, /coffer-dr]]\n",
		"network-config": "version: 2\nethernets: {eth0: {addresses: [10.20.0.11/24]}}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(t.TempDir(), "cidata.img")
	if err := cidataImage(context.Background(), dir, img); err != nil {
		t.Fatal(err)
	}
	mtools := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v %s", name, args, err, out)
		}
		return string(out)
	}
	mtools("fsck.vfat", "-n", img)
	if label := mtools("mlabel", "-i", img, "-s", "::"); !strings.Contains(label, "CIDATA") {
		t.Fatalf("the seed's label: %q", label)
	}
	for name, body := range files {
		if got := mtools("mtype", "-i", img, "::"+name); got != body {
			t.Fatalf("%s on the seed: %q, not %q", name, got, body)
		}
	}
	if err := cidataImage(context.Background(), filepath.Join(dir, "missing"), img); err == nil {
		t.Fatal("a missing cloud-init directory made a seed")
	}
}
