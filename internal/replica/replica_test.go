package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

const (
	testChunk = 64 << 10
	testSize  = 8 << 20
)

// source is a raw disk image that changes between backups, with a copy of
// it as of every backup point (what each replica point must equal).
type source struct {
	path   string
	copies map[string]string // backup point ID -> the image at its instant
	rng    *rand.Rand
}

func newSource(t *testing.T) *source {
	t.Helper()
	dir := t.TempDir()
	s := &source{path: filepath.Join(dir, "disk.raw"), copies: map[string]string{}, rng: rand.New(rand.NewPCG(1, 2))}
	b := make([]byte, testSize)
	for i := range b[:testSize/2] { // the second half is a hole
		b[i] = byte(s.rng.IntN(256))
	}
	if err := os.WriteFile(s.path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// change rewrites a few spans with new data and zeroes one.
func (s *source) change(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(s.path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, testChunk)
	for range 5 {
		for i := range buf {
			buf[i] = byte(s.rng.IntN(256))
		}
		if _, err := f.WriteAt(buf, int64(s.rng.IntN(testSize/testChunk))*testChunk); err != nil {
			t.Fatal(err)
		}
	}
	clear(buf)
	if _, err := f.WriteAt(buf, int64(s.rng.IntN(testSize/2/testChunk))*testChunk); err != nil {
		t.Fatal(err)
	}
}

// backup takes a point of the image and keeps a copy of the image as of it.
func (s *source) backup(t *testing.T, r *repo.Repository) *repo.Point {
	t.Helper()
	p := backuptest.BackupImage(t, r, s.path, backup.Options{})
	b, err := os.ReadFile(s.path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(filepath.Dir(s.path), p.ID.String()+".raw")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s.copies[p.ID.String()] = cp
	return p
}

func requireQemu(t *testing.T) {
	t.Helper()
	testutil.RequireBinary(t, "qemu-img")
	testutil.RequireBinary(t, "qemu-nbd")
}

// sameDisk fails unless the replica point's overlay reads as the image.
func sameDisk(t *testing.T, what, overlay, raw string) {
	t.Helper()
	out, err := exec.Command("qemu-img", "compare", "-q", "-f", "qcow2", "-F", "raw", overlay, raw).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %s differs from %s: %v %s", what, overlay, raw, err, out)
	}
}

// checkPoints checks every kept point against the image at its instant.
func checkPoints(t *testing.T, dir string, s *source) *State {
	t.Helper()
	st, err := LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Points {
		sameDisk(t, "point "+p.BackupPoint, p.Disks[0].File, s.copies[p.BackupPoint])
	}
	return st
}

// TestReplicaFollowsItsSource replicates five backup points in turn: each
// run reads only the changed chunks, every kept point equals the image at
// its backup point's instant (qemu-img compare), the oldest points are
// merged away to keep three, and the directory holds nothing else.
func TestReplicaFollowsItsSource(t *testing.T) {
	requireQemu(t)
	ctx := context.Background()
	r := repotest.New(t, repo.InitOptions{ChunkSize: testChunk})
	s := newSource(t)
	dir := filepath.Join(t.TempDir(), "standby")
	for run := range 5 {
		if run > 0 {
			s.change(t)
		}
		p := s.backup(t, r)
		res, err := Run(ctx, r, p, Options{Dir: dir, Keep: 3})
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if res.UpToDate || res.Point.BackupPoint != p.ID.String() {
			t.Fatalf("run %d: %+v", run, res)
		}
		if run == 0 && res.Point.BytesRead != testSize/2 {
			t.Fatalf("first run read %d bytes, want the image's data (%d)", res.Point.BytesRead, testSize/2)
		}
		// 5 rewritten spans and one zeroed: at most 5 chunks read.
		if run > 0 && (res.Point.BytesRead == 0 || res.Point.BytesRead > 5*testChunk || res.Spans > 6) {
			t.Fatalf("run %d read %d bytes for %d spans: more than the change", run, res.Point.BytesRead, res.Spans)
		}
		st := checkPoints(t, dir, s)
		if want := min(run+1, 3); len(st.Points) != want || st.Merge != nil {
			t.Fatalf("run %d: %d points (merge %v), want %d", run, len(st.Points), st.Merge, want)
		}
		checkOnlyRecorded(t, dir, st)
	}
	// Once more with the same point: nothing to do.
	p, err := r.FindPoint(ctx, "latest")
	if err == nil {
		res, err := Run(ctx, r, p, Options{Dir: dir, Keep: 3})
		if err != nil || !res.UpToDate {
			t.Fatalf("again: %+v %v", res, err)
		}
	}
}

// checkOnlyRecorded fails when the directory holds an overlay the record
// does not name, or a recorded one is missing, or the chain is wrong: the
// oldest point standalone, each later one backed by the previous.
func checkOnlyRecorded(t *testing.T, dir string, st *State) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".qcow2") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	rec := chainFiles(st)
	if strings.Join(files, ",") != strings.Join(rec, ",") {
		t.Fatalf("files %v, recorded %v", files, rec)
	}
	for i, f := range rec {
		var info struct {
			Backing string `json:"backing-filename"`
		}
		out, err := exec.Command("qemu-img", "info", "-U", "--output=json", f).Output()
		if err != nil || json.Unmarshal(out, &info) != nil {
			t.Fatalf("info %s: %v", f, err)
		}
		want := ""
		if i > 0 {
			want = filepath.Base(rec[i-1])
		}
		if info.Backing != want {
			t.Fatalf("%s backed by %q, want %q", f, info.Backing, want)
		}
	}
}

// TestStandbyRefusesWriters: while a run holds the standby, QEMU cannot
// open a point's overlay for writing (its own image locking sees coffer's
// lock), a second run is refused, and the points are read-only files.
func TestStandbyRefusesWriters(t *testing.T) {
	requireQemu(t)
	testutil.RequireBinary(t, "qemu-io")
	ctx := context.Background()
	r := repotest.New(t, repo.InitOptions{ChunkSize: testChunk})
	s := newSource(t)
	dir := filepath.Join(t.TempDir(), "standby")
	if _, err := Run(ctx, r, s.backup(t, r), Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	st := checkPoints(t, dir, s)
	file := st.Points[0].Disks[0].File
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm()&0o222 != 0 {
		t.Fatalf("a committed point is writable: %v %v", fi.Mode(), err)
	}
	g, err := guardFiles([]string{file})
	if err != nil {
		t.Fatal(err)
	}
	// A copy with write permission, so that only the lock refuses.
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("qemu-io", "-f", "qcow2", "-c", "write 0 512", file).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `"write" lock`) {
		t.Fatalf("qemu-io wrote into a guarded point: %v %s", err, out)
	}
	if out, err := exec.Command("qemu-img", "compare", "-f", "qcow2", "-F", "raw", file, s.copies[st.Points[0].BackupPoint]).CombinedOutput(); err != nil {
		t.Fatalf("a reader is refused by the guard: %v %s", err, out)
	}
	lock, err := lockRun(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, r, s.backup(t, r), Options{Dir: dir}); !errors.Is(err, ErrBusy) {
		t.Fatalf("second run while one holds the standby: %v", err)
	}
	_ = lock.Close()
	_ = g.Close()
	out, err = exec.Command("qemu-io", "-f", "qcow2", "-c", "write 0 512", file).CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("lock")) {
		t.Fatalf("after the guard: %v %s", err, out)
	}
}
