package backup_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/repo"
)

// niceRecorder notes the niceness of the thread of every read.
type niceRecorder struct {
	io.ReaderAt
	mu    sync.Mutex
	nices map[int]int // niceness: reads
}

func (n *niceRecorder) ReadAt(p []byte, off int64) (int, error) {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0) // the calling thread's: 20 - niceness
	if err != nil {
		return 0, err
	}
	n.mu.Lock()
	n.nices[20-prio]++
	n.mu.Unlock()
	return n.ReaderAt.ReadAt(p, off)
}

// processNice is the niceness the test runs at (`nice go test` raises it).
func processNice(t *testing.T) int {
	t.Helper()
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	return 20 - prio
}

// nicedThreads lists the process's threads whose niceness is not base.
func nicedThreads(t *testing.T, base int) []string {
	t.Helper()
	dirs, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		stat, err := os.ReadFile(filepath.Join("/proc/self/task", d.Name(), "stat"))
		if err != nil {
			continue // the thread ended meanwhile
		}
		// Fields after the command, which ends at the last ')': state is
		// field 3 of stat(5), niceness field 19.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if nice, _ := strconv.Atoi(f[16]); nice != base {
			out = append(out, fmt.Sprintf("thread %s at niceness %d", d.Name(), nice))
		}
	}
	return out
}

// TestPipelineRunsAtItsNiceness: with Options.Nice every read of the
// source happens on a thread at that niceness, the point restores equal
// to the disk, and once the backup is over no thread of the process is
// niced: the pipeline's threads are put back before they are released to
// the rest of the process (the test runs as root, which may raise a
// priority again; others end their threads instead).
func TestPipelineRunsAtItsNiceness(t *testing.T) {
	base := processNice(t)
	want := max(base, 7) // a thread is never raised above the process
	if left := nicedThreads(t, base); len(left) != 0 {
		t.Fatalf("niced threads before the backup: %v", left)
	}
	r := newRepo(t, repo.InitOptions{})
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	makeImage(t, img, 24<<20)
	d, src := diskOf(t, img)
	defer src.Close()
	rec := &niceRecorder{ReaderAt: d.Reader, nices: map[int]int{}}
	d.Reader = rec
	snap := runWith(t, r, backup.Request{Source: repo.Source{Kind: "disk", VMName: "niced"}, Disks: []backup.Disk{d}}, backup.Options{Nice: 7})
	if len(rec.nices) != 1 || rec.nices[want] == 0 {
		t.Fatalf("reads by the niceness of their thread: %v, want all at %d", rec.nices, want)
	}
	out := filepath.Join(dir, "restored.img")
	restoreTo(t, r, snap, out)
	if sum(t, out) != sum(t, img) {
		t.Fatal("the restored disk differs from the source")
	}
	if left := nicedThreads(t, base); len(left) != 0 {
		t.Fatalf("niced threads left after the backup: %v", left)
	}
}

// TestPipelineAtProcessPriorityByDefault: without Options.Nice the
// pipeline's reads run at the process's own niceness.
func TestPipelineAtProcessPriorityByDefault(t *testing.T) {
	r := newRepo(t, repo.InitOptions{})
	img := filepath.Join(t.TempDir(), "disk.img")
	makeImage(t, img, 8<<20)
	d, src := diskOf(t, img)
	defer src.Close()
	rec := &niceRecorder{ReaderAt: d.Reader, nices: map[int]int{}}
	d.Reader = rec
	runWith(t, r, backup.Request{Source: repo.Source{Kind: "disk", VMName: "plain"}, Disks: []backup.Disk{d}}, backup.Options{})
	if base := processNice(t); len(rec.nices) != 1 || rec.nices[base] == 0 {
		t.Fatalf("reads by the niceness of their thread: %v, want all at %d", rec.nices, base)
	}
}
