package qemu_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
)

func newTestRepo(t *testing.T) *repo.Repository { return repotest.New(t, repo.InitOptions{}) }

// qsdFleet is n storage daemons, each written to continuously, protected
// by one qemu connection through the job engine.
type qsdFleet struct {
	t       *testing.T
	ctx     context.Context
	dir     string
	insts   []*qsdInstance
	writers map[string]*writer // by daemon name
	conn    *qemu.Connector
	repo    *repo.Repository
	eng     *engine.Engine
	state   string
}

func startFleet(t *testing.T, n int, pace time.Duration) *qsdFleet {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	f := &qsdFleet{t: t, ctx: ctx, dir: t.TempDir(), writers: map[string]*writer{}}
	f.state = filepath.Join(f.dir, "state")
	for i := 0; i < n; i++ {
		size := int64(32+(32*i)/n) << 20 // 32..62 MiB
		q := startQSD(t, f.dir, fmt.Sprintf("qsd-%02d", i), size, i == 0)
		f.insts = append(f.insts, q)
		f.writers[q.name] = startWriterFilled(ctx, t, q, uint64(i+1), pace, true)
	}
	var err error
	f.conn, err = qemu.New(qemu.Config{Sockets: []string{filepath.Join(f.dir, "*.qmp")}, StateDir: f.state, Connections: 2})
	if err != nil {
		t.Fatal(err)
	}
	f.repo = newTestRepo(t)
	cfg := &policy.Config{Limits: policy.Limits{Tasks: 4}, Connections: []policy.Connection{{Name: "qsd", Kind: "qemu"}}}
	f.eng, err = engine.New(ctx, engine.Options{Config: cfg, Catalog: enginetest.NewCatalog(),
		Connectors:     map[string]hypervisor.Connector{"qsd": f.conn},
		OpenRepository: func(context.Context, string) (*repo.Repository, error) { return f.repo, nil },
		FlushInterval:  20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.eng.Close() })
	return f
}

// job is one run of the policy with, per daemon, the writes acknowledged
// before it began and sent by its end: the bounds of its points.
type job struct {
	mode   string
	res    *engine.Result
	lo, hi map[string]uint64
}

func (f *qsdFleet) run(p policy.Policy, wantMode string) job {
	t := f.t
	j := job{mode: wantMode, lo: map[string]uint64{}, hi: map[string]uint64{}}
	for name, w := range f.writers {
		j.lo[name] = w.acked.Load()
	}
	began := time.Now()
	res, err := f.eng.Run(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	for name, w := range f.writers {
		j.hi[name] = w.issued()
		if err := w.failure(); err != nil {
			t.Fatalf("writer of %s: %v", name, err)
		}
	}
	if res.Job.Status != catalog.StatusSuccess || len(res.Tasks) != len(f.insts) {
		t.Fatalf("%s job: %s (%s), %d tasks, failed %+v", wantMode, res.Job.Status, res.Job.Error, len(res.Tasks), res.Failed())
	}
	var read int64
	for _, tk := range res.Tasks {
		if tk.Mode != wantMode {
			t.Fatalf("%s backed up %s, want %s (%v)", tk.VMName, tk.Mode, wantMode, tk.Warnings)
		}
		read += tk.BytesRead
	}
	t.Logf("%s job: %d daemons in %s, read %d MiB", wantMode, len(res.Tasks), took.Round(time.Millisecond), read>>20)
	j.res = res
	return j
}

// jobPoints is what one job made, per daemon: the write its point ends
// at, how many writes landed between the job's start and that point, and
// the bytes the backup read.
type jobPoints struct {
	at, after map[string]uint64
	read      map[string]int64
}

// check restores every point a job made and checks it against the write
// sequences: each must be its disk after exactly the first k writes, k
// between the job's bounds.
func (f *qsdFleet) check(j job) jobPoints {
	t := f.t
	snaps, err := f.repo.Points(f.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*repo.Point{}
	for _, s := range snaps {
		byID[s.ID.String()] = s
	}
	jp := jobPoints{at: map[string]uint64{}, after: map[string]uint64{}, read: map[string]int64{}}
	for _, tk := range j.res.Tasks {
		s := byID[tk.BackupPointID]
		if s == nil {
			t.Fatalf("point %s of %s not in the repository", tk.BackupPointID, tk.VMName)
		}
		w := f.writers[tk.VMName]
		img := readPoint(f.ctx, t, f.repo, s, "vda")
		k := w.checkPoint(t, j.mode+" point of "+tk.VMName, img, j.lo[tk.VMName], j.hi[tk.VMName])
		jp.at[tk.VMName], jp.after[tk.VMName], jp.read[tk.VMName] = k, k-j.lo[tk.VMName], tk.BytesRead
	}
	return jp
}

// noLeftovers checks the state directory and, on the daemon with an admin
// monitor, that no coffer node, export or job is left.
func (f *qsdFleet) noLeftovers() {
	f.t.Helper()
	for _, sub := range []string{"journal", "fleece"} {
		if ents, _ := os.ReadDir(filepath.Join(f.state, sub)); len(ents) != 0 {
			f.t.Fatalf("leftover files in %s: %v", sub, ents)
		}
	}
	assertDaemonClean(f.ctx, f.t, f.insts[0])
}

// TestQSDFleetFullThenIncremental backs up 16 storage daemons, each written
// to continuously through its NBD export, through the job engine (4 tasks
// at a time): a full, then an incremental from the dirty bitmaps. Every
// point is exactly its disk at the snapshot instant.
func TestQSDFleetFullThenIncremental(t *testing.T) {
	n, pace := 16, 10*time.Millisecond
	if testing.Short() {
		n = 6
	}
	f := startFleet(t, n, pace)
	vms, err := f.conn.Inventory(f.ctx)
	if err != nil || len(vms) != n {
		t.Fatalf("inventory: %d daemons, %v", len(vms), err)
	}
	for _, vm := range vms {
		q := f.insts[0]
		for _, i := range f.insts {
			if i.name == vm.Name {
				q = i
			}
		}
		if vm.ID != "qsd:"+q.qmp || vm.Tags["qemu-role"] != "storage-daemon" || len(vm.Disks) != 1 ||
			vm.Disks[0].Key != "vda" || vm.Disks[0].Format != "qcow2" || vm.Disks[0].Path != q.img || vm.PowerState != "running" {
			t.Fatalf("inventory entry %+v", vm)
		}
	}
	// Change tracking's self-check is off: this test counts the spans
	// the bitmaps make an incremental read, exactly (the check has
	// TestStaleBitmapIsCaught).
	p := policy.Policy{Name: "qsd", Connection: "qsd", Tasks: 4, ChangeCheck: -1,
		Retries: policy.Retries{Attempts: 2, Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}}
	// Points are checked after both jobs, so that the incremental covers
	// only the writes made while the jobs ran.
	fullJob := f.run(p, "full")
	f.noLeftovers()
	// A daemon has no guest to quiesce: a quiesced policy falls back, and
	// its points say so.
	p.Snapshot = string(hypervisor.Quiesced)
	incJob := f.run(p, "incremental")
	f.noLeftovers()
	for _, jb := range []job{fullJob, incJob} {
		for _, tk := range jb.res.Tasks {
			if tk.SnapshotMode != jb.res.Tasks[0].SnapshotMode || tk.SnapshotModeAchieved != string(hypervisor.CrashConsistent) {
				t.Fatalf("%s job: %s requested %q achieved %q", jb.mode, tk.VMName, tk.SnapshotMode, tk.SnapshotModeAchieved)
			}
			if fellBack := strings.Contains(strings.Join(tk.Warnings, ";"), "no guest to quiesce"); fellBack != (jb.mode == "incremental") {
				t.Fatalf("%s job: %s warnings %v", jb.mode, tk.VMName, tk.Warnings)
			}
		}
	}
	if got := incJob.res.Tasks[0].SnapshotMode; got != string(hypervisor.Quiesced) {
		t.Fatalf("incremental job requested %q", got)
	}
	full, inc := f.check(fullJob), f.check(incJob)
	// An incremental reads exactly the repository spans holding blocks
	// written between the two snapshot instants: the dirty bitmaps lost
	// nothing (checkPoint) and added nothing.
	span := int64(f.repo.Config().ChunkSize)
	for name, w := range f.writers {
		if want := w.spansWritten(full.at[name], inc.at[name], span) * span; inc.read[name] != want {
			t.Fatalf("incremental of %s read %d bytes; writes %d..%d touched %d bytes of spans", name, inc.read[name], full.at[name]+1, inc.at[name], want)
		}
	}
	// The writers did not wait for the backups: in each job, some daemons
	// were snapshotted after writes made since the job began.
	for mode, jp := range map[string]jobPoints{"full": full, "incremental": inc} {
		var most uint64
		for _, k := range jp.after {
			most = max(most, k)
		}
		if most == 0 {
			t.Fatalf("%s job: no write landed between the job's start and any snapshot: %v", mode, jp.after)
		}
		t.Logf("%s job: writes between job start and snapshot, per daemon: %v", mode, jp.after)
	}
	for name, w := range f.writers {
		if err := w.halt(); err != nil {
			t.Fatalf("writer of %s: %v", name, err)
		}
		if strings.HasPrefix(name, "qsd-00") {
			t.Logf("writer of %s: %d writes", name, w.issued())
		}
	}
}
