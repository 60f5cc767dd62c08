package storagesnap_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// groupLab is writing guests (with guest agents) whose disks live on
// loop-mounted XFS datastores, one qemu connection over all of them, and
// a repository.
type groupLab struct {
	t      *testing.T
	ctx    context.Context
	vms    map[string]*guestvm.VM
	admins map[string]*qmp.Client
	conn   *qemu.Connector
	repo   *repo.Repository
	state  string
	cat    *enginetest.Catalog
	eng    *engine.Engine
}

// startGroupLab boots one guest per entry of placement (name -> the
// datastore directories of its disks, comma-separated).
func startGroupLab(t *testing.T, placement map[string]string) *groupLab {
	testutil.RequireBinary(t, "qemu-system-x86_64")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	l := &groupLab{t: t, ctx: ctx, vms: map[string]*guestvm.VM{}, admins: map[string]*qmp.Client{}, state: t.TempDir(), cat: enginetest.NewCatalog()}
	var socks []string
	i := 0
	for name, ds := range placement {
		i++
		var disks []guestvm.Disk
		for k, dir := range strings.Split(ds, ",") { // a guest on several datastores
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			id := fmt.Sprintf("vd%c", 'a'+k)
			disk := filepath.Join(dir, name+"-"+id+".qcow2")
			if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "32M").CombinedOutput(); err != nil {
				t.Fatalf("%v %s", err, out)
			}
			disks = append(disks, guestvm.Disk{ID: id, Path: disk, Format: "qcow2"})
		}
		vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: name, UUID: fmt.Sprintf("6b1d3c0e-8f53-4b8e-9a51-0d1c2b3a4f%02d", i),
			Dir: filepath.Join(t.TempDir(), "vm"), Mode: "write", Base: 64, Interval: 40 * time.Millisecond, GuestAgent: true,
			Disks: disks})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(vm.Kill)
		l.vms[name] = vm
		socks = append(socks, vm.QMPPath)
	}
	for name, vm := range l.vms {
		if _, err := vm.WaitConsole(ctx, "COFFER READY"); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, vm.Console())
		}
		if l.admins[name], err = qmp.Dial(ctx, vm.TestQMP); err != nil {
			t.Fatal(err)
		}
	}
	if l.conn, err = qemu.New(qemu.Config{Sockets: socks, StateDir: l.state, Connections: 2}); err != nil {
		t.Fatal(err)
	}
	l.repo = repotest.New(t, repo.InitOptions{})
	return l
}

// run runs a group: datastore policy over every guest through the lab's
// engine, made at the first run with the providers (its start cleans up
// leftovers; it owns the repository from then on).
func (l *groupLab) run(providers policy.StorageSnapshots, p policy.Policy) *engine.Result {
	l.t.Helper()
	if l.eng == nil {
		cfg := &policy.Config{Limits: policy.Limits{Tasks: 4}, Connections: []policy.Connection{{Name: "lab", Kind: "qemu"}}, StorageSnapshots: providers}
		eng, err := engine.New(l.ctx, engine.Options{Config: cfg, Catalog: l.cat,
			Connectors:          map[string]hypervisor.Connector{"lab": l.conn},
			StorageSnapshotters: storagesnap.For(providers, l.state, nil),
			OpenRepository:      func(context.Context, string) (*repo.Repository, error) { return l.repo, nil },
			FlushInterval:       20 * time.Millisecond})
		if err != nil {
			l.t.Fatal(err)
		}
		l.t.Cleanup(func() { eng.Close() })
		l.eng = eng
	}
	p.Connection, p.Group = "lab", "datastore"
	res, err := l.eng.Run(l.ctx, p)
	if err != nil {
		l.t.Fatal(err)
	}
	return res
}

func (l *groupLab) events(res *engine.Result, kind string) []catalog.Event {
	evs, err := l.cat.ListEvents(l.ctx, catalog.EventFilter{JobID: res.Job.ID})
	if err != nil {
		l.t.Fatal(err)
	}
	var out []catalog.Event
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// released checks every guest runs and is thawed, and that neither the
// connector nor a provider left anything.
func (l *groupLab) released(roots ...string) {
	l.t.Helper()
	for name, a := range l.admins {
		var st struct {
			Status string `json:"status"`
		}
		if err := a.Execute(l.ctx, "query-status", nil, &st); err != nil || st.Status != "running" {
			l.t.Fatalf("%s is %q (%v), want running", name, st.Status, err)
		}
		ga, err := qmp.DialGuestAgent(l.ctx, l.vms[name].QGAPath)
		if err != nil {
			l.t.Fatal(err)
		}
		fs, err := ga.FreezeStatus(l.ctx)
		ga.Close()
		if err != nil || fs != "thawed" {
			l.t.Fatalf("%s: guest filesystems %q (%v), want thawed", name, fs, err)
		}
	}
	for _, sub := range []string{"journal", "fleece", "storage-snapshots"} {
		if ents, _ := os.ReadDir(filepath.Join(l.state, sub)); len(ents) != 0 {
			l.t.Fatalf("leftover state in %s: %v", sub, ents)
		}
	}
	for _, r := range roots {
		if ents, _ := os.ReadDir(filepath.Join(r, storagesnap.SnapDir)); len(ents) != 0 {
			l.t.Fatalf("storage snapshots left in %s: %v", r, ents)
		}
	}
}

// consistent restores a task's point and checks the guest's workload on
// it: every block whole, as at one instant.
func (l *groupLab) consistent(tk catalog.Task) {
	l.t.Helper()
	snaps, err := l.repo.Points(l.ctx, nil)
	if err != nil {
		l.t.Fatal(err)
	}
	for _, s := range snaps {
		if s.ID.String() != tk.BackupPointID {
			continue
		}
		out := filepath.Join(l.t.TempDir(), tk.VMName+".raw")
		if _, err := restore.ToFile(l.ctx, l.repo, s, s.Disks[0], out, restore.FileOptions{}); err != nil {
			l.t.Fatal(err)
		}
		f, err := os.Open(out)
		if err != nil {
			l.t.Fatal(err)
		}
		defer f.Close()
		fi, _ := f.Stat()
		if _, err := guestvm.CheckDisk(f, fi.Size()); err != nil {
			l.t.Fatalf("point of %s is not consistent: %v", tk.VMName, err)
		}
		return
	}
	l.t.Fatalf("point %s of %s not in the repository", tk.BackupPointID, tk.VMName)
}

// Group protection end to end: two writing guests on one reflink datastore
// are quiesced and stopped together, one storage snapshot is taken, both
// are released at once and read from the snapshot, which is deleted after
// the last one; the incremental's change sets come from the dirty bitmaps.
// A third guest, on an XFS without reflinks, shows the fallback policy.
func TestGroupProtectionOnAReflinkDatastore(t *testing.T) {
	xfs := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	plain := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=0")
	ds, nods := filepath.Join(xfs, "vms"), filepath.Join(plain, "vms")
	l := startGroupLab(t, map[string]string{"web-1": ds, "web-2": ds, "db-1": nods})
	providers := policy.StorageSnapshots{{Name: "xfs", Kind: "reflink", Connections: []string{"lab"}, Datastores: []string{xfs, plain}}}
	p := policy.Policy{Name: "group", Snapshot: string(hypervisor.Quiesced), Quiesce: string(hypervisor.QuiesceRequired), StorageFallback: "vm"}

	full := l.run(providers, p)
	if full.Job.Status != catalog.StatusSuccess || len(full.Tasks) != 3 {
		t.Fatalf("full: %s (%s), %d tasks, failed %+v", full.Job.Status, full.Job.Error, len(full.Tasks), full.Failed())
	}
	groups := l.events(full, "group-snapshot")
	if len(groups) != 1 || groups[0].Fields["vms"] != float64(2) && groups[0].Fields["vms"] != 2 {
		t.Fatalf("group snapshots %+v, want one of 2 VMs", groups)
	}
	t.Logf("full: %s", groups[0].Message)
	if fb := l.events(full, "storage-fallback"); len(fb) != 1 || !strings.Contains(fb[0].Message, "reflink=1") || !strings.Contains(fb[0].Message, nods) {
		t.Fatalf("fallback events %+v, want one for %s naming reflink=1", fb, nods)
	}
	if del := l.events(full, "storage-snapshot-deleted"); len(del) != 1 || !strings.Contains(del[0].Message, "err: <nil>") {
		t.Fatalf("deletions %+v, want the one storage snapshot deleted", del)
	}
	for _, tk := range full.Tasks {
		l.consistent(tk)
	}
	l.released(ds, nods)

	inc := l.run(providers, p)
	if inc.Job.Status != catalog.StatusSuccess || len(inc.Tasks) != 3 {
		t.Fatalf("incremental: %s (%s), failed %+v", inc.Job.Status, inc.Job.Error, inc.Failed())
	}
	fullRead := map[string]int64{}
	for _, tk := range full.Tasks {
		fullRead[tk.VMName] = tk.BytesRead
	}
	for _, tk := range inc.Tasks {
		if tk.Mode != "incremental" || tk.BytesRead >= fullRead[tk.VMName] {
			t.Fatalf("%s: %s reading %d bytes after a full of %d (%v), want an incremental from the bitmaps", tk.VMName, tk.Mode, tk.BytesRead, fullRead[tk.VMName], tk.Warnings)
		}
		l.consistent(tk)
	}
	l.released(ds, nods)

	// Without the fallback, the datastore without reflinks fails its VM
	// with the reason; the others are protected.
	p.StorageFallback = ""
	res := l.run(providers, p)
	failed := res.Failed()
	if len(failed) != 1 || failed[0].VMName != "db-1" || !strings.Contains(failed[0].Error, "reflink=1") {
		t.Fatalf("failed %+v, want db-1 with the reason", failed)
	}
	l.released(ds, nods)
}

// hangingArray is the test's own array for the exec provider: reflink
// copies (cp --reflink=always) kept in a directory of its own; create
// fails or hangs after its first file when the fault file says so.
const hangingArray = `#!/bin/sh
set -eu
snaps=%q
fault=$(cat %q 2>/dev/null || true)
case "$1" in
create)
	mkdir "$snaps/$COFFER_LABEL"
	printf '%%s\n' "$COFFER_FILES" | while read -r f; do
		[ -n "$f" ] || continue
		cp --reflink=always "$COFFER_DATASTORE/$f" "$snaps/$COFFER_LABEL/"
		if [ "$fault" = fail ]; then echo "array busy: controller B offline" >&2; exit 3; fi
		if [ "$fault" = hang ]; then sleep 600; fi
	done
	;;
present) echo "$snaps/$COFFER_LABEL" ;;
list) ls "$snaps" ;;
delete) rm -rf "$snaps/$COFFER_LABEL" ;;
esac
`

// A provider command that fails or hangs half-way: the half-made snapshot
// is deleted, the held VMs are released (running, thawed), and their tasks
// fail with the reason; a VM whose disks span two datastores is backed up
// on its own, with a warning.
func TestGroupProtectionProviderFailsOrHangs(t *testing.T) {
	xfs := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	ds, other := filepath.Join(xfs, "vms"), filepath.Join(xfs, "other")
	l := startGroupLab(t, map[string]string{"web-1": ds, "web-2": ds, "span-1": ds + "," + other})
	snaps := filepath.Join(xfs, "array")
	if err := os.MkdirAll(snaps, 0o755); err != nil {
		t.Fatal(err)
	}
	fault := filepath.Join(t.TempDir(), "fault")
	script := filepath.Join(t.TempDir(), "array.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(hangingArray, snaps, fault)), 0o755); err != nil {
		t.Fatal(err)
	}
	providers := policy.StorageSnapshots{{Name: "array", Kind: "exec", Connections: []string{"lab"}, Datastores: []string{ds},
		Command: []string{script}, Timeout: policy.Duration(3 * time.Second)}}
	p := policy.Policy{Name: "group", Snapshot: string(hypervisor.Quiesced), Quiesce: string(hypervisor.QuiesceRequired),
		Retries: policy.Retries{Attempts: 1}}
	for _, tc := range []struct{ fault, want string }{
		{"fail", "array busy: controller B offline"},
		{"hang", "did not finish in time and was killed"},
	} {
		if err := os.WriteFile(fault, []byte(tc.fault), 0o644); err != nil {
			t.Fatal(err)
		}
		res := l.run(providers, p)
		byName := map[string]catalog.Task{}
		for _, tk := range res.Tasks {
			byName[tk.VMName] = tk
		}
		for _, name := range []string{"web-1", "web-2"} {
			if tk := byName[name]; tk.Status != catalog.StatusFailed || !strings.Contains(tk.Error, tc.want) {
				t.Fatalf("%s: %s: %s %q, want failed with %q", tc.fault, name, tk.Status, tk.Error, tc.want)
			}
		}
		if tk := byName["span-1"]; tk.Status != catalog.StatusSuccess {
			t.Fatalf("%s: span-1 %s %q, want backed up on its own", tc.fault, tk.Status, tk.Error)
		}
		if ws := l.events(res, "group"); len(ws) != 1 || !strings.Contains(ws[0].Message, "span several datastores") {
			t.Fatalf("%s: spanning warnings %+v", tc.fault, ws)
		}
		if left, _ := os.ReadDir(snaps); len(left) != 0 {
			t.Fatalf("%s: the half-made snapshot is still on the array: %v", tc.fault, left)
		}
		l.released(ds, other)
	}
}
