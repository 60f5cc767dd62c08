package repocmd_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"

	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestS3ImmutableCopy copies a point of a local repository (which cannot
// lock) to an Object Lock bucket with --immutable-for: the copy is locked
// there with everything it needs, the target's keys cannot be removed,
// and after an attacker with the bucket's admin keys deleted all they
// could, the point restores byte-identically from the bucket and the
// password alone.
func TestS3ImmutableCopy(t *testing.T) {
	srv := testutil.StartS3(t)
	e := clitest.NewEnv(t)
	for k, v := range srv.Env() {
		e.Vars[k] = v
	}
	e.Must("init")
	img := e.Image("vm.img", 32<<20, 8)
	e.Must("backup", "disk", img, "--name", "vm")
	bucket := srv.Bucket(t, true)
	target := "s3://" + bucket + "/offsite"
	const targetPassword = "offsite password"
	e.Vars["COFFER_TO_PASSWORD"] = targetPassword
	saved := e.Vars["COFFER_REPO"]
	e.Vars["COFFER_REPO"], e.Vars["COFFER_PASSWORD"] = target, targetPassword
	e.Must("init")
	e.Vars["COFFER_REPO"], e.Vars["COFFER_PASSWORD"] = saved, "correct horse"

	// A target that cannot lock is refused before anything is copied.
	local := e.Dir + "/second"
	e.Vars["COFFER_REPO"], e.Vars["COFFER_PASSWORD"] = local, targetPassword
	e.Must("init")
	e.Vars["COFFER_REPO"], e.Vars["COFFER_PASSWORD"] = saved, "correct horse"
	if out := e.Expect(command.ExitUsage, "copy", "--to", local, "--immutable-for", "3d"); !strings.Contains(out, "Object Lock") {
		t.Fatalf("copy --immutable-for to a local repository: %s", out)
	}
	if out := e.Expect(command.ExitUsage, "copy", "--to", target, "--immutable-for", "-1d"); !strings.Contains(out, "positive duration") {
		t.Fatalf("negative --immutable-for: %s", out)
	}

	const d = 3 * 24 * time.Hour
	start := time.Now()
	res := copyTo(e, t, target, "--immutable-for", "3d")
	if len(res.Copied) != 1 {
		t.Fatalf("copy: %+v", res)
	}
	point := res.Copied[0]
	packs := requirePointLocked(t, srv, bucket, "offsite", targetPassword, point, start.Add(d))

	// The target's key opens locked points: removing it fails and says why
	// (a second key is added first, so it is not the last one, and opens
	// the target for the removal, so it is not the key in use). The new
	// key is locked as long as the first.
	e.Vars["COFFER_REPO"], e.Vars["COFFER_PASSWORD"] = target, targetPassword
	var keys []api.Key
	if err := json.Unmarshal([]byte(e.Must("key", "list", "--json")), &keys); err != nil || len(keys) != 1 {
		t.Fatalf("keys: %+v %v", keys, err)
	}
	pw2 := filepath.Join(e.Dir, "second.pw")
	if err := os.WriteFile(pw2, []byte("second offsite password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Must("key", "add", "--new-password-file", pw2)
	e.Vars["COFFER_PASSWORD"] = "second offsite password"
	if out := e.Expect(command.ExitUsage, "key", "remove", keys[0].ID[:8]); !strings.Contains(out, "opens immutable backup points") || !strings.Contains(out, "locked until") {
		t.Fatalf("removing a locked key: %s", out)
	}
	e.Vars["COFFER_PASSWORD"] = targetPassword
	requirePointLocked(t, srv, bucket, "offsite", "second offsite password", point, start.Add(d))

	refused := attackRepository(t, srv, bucket, "offsite")
	restored := recoverAndRestore(t, e, point)
	if !clitest.SameFile(t, restored, img) {
		t.Fatal("the copied point restores different bytes after the attack")
	}
	t.Logf("%d packs locked; the attack was refused on %d versions", packs, refused)
}

// TestS3ImmutablePolicyOnQEMUGuest runs a scheduled policy over a real
// QEMU guest into an Object Lock bucket: first without immutable-for (an
// unlocked full), then with it (an incremental sharing the full's packs).
// The incremental is locked with everything it needs, the full's packs
// extended, and after an admin attacker deleted all they could it still
// restores byte-identically from the bucket and the password alone.
func TestS3ImmutablePolicyOnQEMUGuest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	srv := testutil.StartS3(t)
	e, bucket := newS3Env(t, srv, true, srv.Endpoint)
	vms := clitest.BootWriters(t, ctx, e.Dir, 1)
	e.Must("init")
	policy := func(immutable string) {
		e.Config(fmt.Sprintf(`
state-dir: %s
connections:
  - name: kvm1
    kind: qemu
    options: {sockets: ["%s"], host: kvm1}
policies:
  - name: nightly
    connection: kvm1
    select: {names: ["web-*"]}
    schedule: "0 22 * * *"%s
`, filepath.Join(e.Dir, "state"), filepath.Join(e.Dir, "vm-*", "qmp.sock"), immutable))
	}
	run := func(wantMode string) string {
		t.Helper()
		var job api.Job
		out := e.Must("run", "nightly", "--json")
		if err := json.Unmarshal([]byte(out), &job); err != nil || job.Status != "success" || len(job.Tasks) != 1 || job.Tasks[0].Mode != wantMode {
			t.Fatalf("run: %v %s", err, out)
		}
		return job.Tasks[0].PointID
	}
	policy("")
	run("full")
	if _, _, err := vms[0].WaitConsoleFrom(ctx, vms[0].Mark(), "COFFER WROTE"); err != nil {
		t.Fatal(err)
	}
	policy("\n    immutable-for: 2d")
	if out := e.Must("policy", "check"); !strings.Contains(out, "immutable for 48h0m0s") {
		t.Fatalf("policy check: %s", out)
	}
	start := time.Now()
	point := run("incremental")
	packs := requirePointLocked(t, srv, bucket, "repo", "correct horse", point, start.Add(48*time.Hour))

	before := filepath.Join(e.Dir, "before.raw")
	e.Must("restore", point, "--to", before)
	checkGuestDisk(t, before)
	refused := attackRepository(t, srv, bucket, "repo")
	after := recoverAndRestore(t, e, point)
	if !clitest.SameFile(t, before, after) {
		t.Fatal("the locked point restores different bytes after the attack")
	}
	t.Logf("%d packs locked; the attack was refused on %d versions", packs, refused)
}

// checkGuestDisk checks the self-verifying blocks of a restored guest disk.
func checkGuestDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	if rep, err := guestvm.CheckDisk(f, fi.Size()); err != nil || rep.Base != 64 {
		t.Fatalf("restored disk: %+v %v", rep, err)
	}
}

// TestS3ImmutableVSpherePolicy backs a vCenter simulator's VM up through
// a vsphere policy with immutable-for into an Object Lock bucket: the
// point is locked with everything it needs and, after an admin attacker
// deleted all they could, restores the VM's disk byte-identically from
// the bucket and the password alone.
func TestS3ImmutableVSpherePolicy(t *testing.T) {
	srv := testutil.StartS3(t)
	vc := vclab.Start(t, 1, 1)
	lab := clitest.NewVCLab(t, vc)
	vm := lab.VMs[0]
	disk := lab.Disk(vm.Name)
	want := make([]byte, disk.Size)
	rand.Read(want[:512<<10])
	copy(want[disk.Size-100<<10:], bytes.Repeat([]byte("end of disk "), 8000))
	lab.WriteFlat(disk, want)

	e, bucket := newS3Env(t, srv, true, srv.Endpoint)
	e.Must("init")
	start := time.Now()
	lab.BackUp(e, vm.Name, "", "immutable-for: 1d12h")
	snaps := clitest.SnapshotsJSON(t, e)
	if len(snaps) != 1 || snaps[0].SourceKind != "vsphere" {
		t.Fatalf("points: %+v", snaps)
	}
	point := snaps[0].ID
	packs := requirePointLocked(t, srv, bucket, "repo", "correct horse", point, start.Add(36*time.Hour))

	refused := attackRepository(t, srv, bucket, "repo")
	restored := recoverAndRestore(t, e, point)
	got, err := os.ReadFile(restored)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the locked vSphere point restores different bytes after the attack")
	}
	t.Logf("%d packs locked; the attack was refused on %d versions", packs, refused)
}
