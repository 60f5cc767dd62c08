package iolatency

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// sysStat reads the device's counters from /sys/dev/block/MAJ:MIN/stat,
// the kernel's other view of the same numbers, independently of
// /proc/diskstats and of Diskstats.Read.
func sysStat(t *testing.T, d Device) Counters {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/stat", d.Major, d.Minor))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseDiskstats(append([]string{"", "", d.Name}, strings.Fields(string(b))...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writeDirect writes n aligned 64 KiB blocks with O_DIRECT and syncs, so
// each reaches the device as a write it counts.
func writeDirect(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|unix.O_DIRECT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw := make([]byte, 64<<10+4096)
	off := int(4096 - uintptr(unsafe.Pointer(&raw[0]))%4096)
	buf := raw[off : off+64<<10]
	for i := range buf {
		buf[i] = byte(i)
	}
	for i := 0; i < n; i++ {
		if _, err := f.WriteAt(buf, int64(i)*int64(len(buf))); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestDiskstatsOfALoopDevice meters a real loop device: the writes the
// test makes show in the counters, and the latency is the counters'
// time delta over their operations delta, bracketed by the kernel's
// /sys view read before and after.
func TestDiskstatsOfALoopDevice(t *testing.T) {
	mnt := testutil.MountLoopFS(t, "ext4", 64<<20)
	dev, err := DeviceOf(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if dev.Major != 7 || !strings.HasPrefix(dev.Name, "loop") {
		t.Fatalf("the loop-mounted file system is on %+v, not a loop device", dev)
	}
	src := Diskstats{Dev: dev}
	m := NewMeter(src)
	ctx := context.Background()
	before := sysStat(t, dev)
	if _, ok, err := m.Sample(ctx); err != nil || ok {
		t.Fatalf("first sample: ok %v err %v, want only a baseline", ok, err)
	}
	first := m.last
	const writes = 32
	writeDirect(t, filepath.Join(mnt, "data"), writes)
	lat, ok, err := m.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second := m.last
	after := sysStat(t, dev)
	if !ok {
		t.Fatalf("no latency after %d direct writes: counters %+v -> %+v", writes, first, second)
	}
	if second.Ops-first.Ops < writes {
		t.Fatalf("the device counted %d operations for %d direct writes", second.Ops-first.Ops, writes)
	}
	for _, c := range []struct {
		name        string
		lo, mid, hi uint64
	}{
		{"ops (first)", before.Ops, first.Ops, after.Ops},
		{"ops (second)", first.Ops, second.Ops, after.Ops},
		{"time (first)", uint64(before.Time), uint64(first.Time), uint64(after.Time)},
		{"time (second)", uint64(first.Time), uint64(second.Time), uint64(after.Time)},
	} {
		if c.mid < c.lo || c.mid > c.hi {
			t.Fatalf("%s: /proc/diskstats read %d, outside the /sys readings around it [%d, %d]", c.name, c.mid, c.lo, c.hi)
		}
	}
	if want := (second.Time - first.Time) / time.Duration(second.Ops-first.Ops); lat != want {
		t.Fatalf("latency %s, want %s = %s over %d operations", lat, want, second.Time-first.Time, second.Ops-first.Ops)
	}
	t.Logf("%s: %d operations in %s, latency %s", src.Name(), second.Ops-first.Ops, second.Time-first.Time, lat)
}

// TestDeviceOfTheTempDir finds the block device of the test's own
// temporary directory, as the engine does for a datastore, and reads its
// line.
func TestDeviceOfTheTempDir(t *testing.T) {
	dir := t.TempDir()
	dev, err := DeviceOf(dir)
	if errors.Is(err, ErrNoBlockDevice) && !testutil.Strict() {
		t.Skip(err) // a tmpfs /tmp
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/sys/dev/block/" + fmt.Sprintf("%d:%d", dev.Major, dev.Minor)); err != nil {
		t.Fatal(err)
	}
	c, err := Diskstats{Dev: dev}.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s := sysStat(t, dev); c.Ops > s.Ops {
		t.Fatalf("/proc/diskstats %d ops, then /sys %d: counters went backwards", c.Ops, s.Ops)
	}
}

func TestDeviceOfAFileSystemWithoutADevice(t *testing.T) {
	_, err := DeviceOf("/proc")
	if !errors.Is(err, ErrNoBlockDevice) || !strings.Contains(err.Error(), "/proc") {
		t.Fatalf("DeviceOf(/proc): %v, want ErrNoBlockDevice naming it", err)
	}
	if _, err := DeviceOf("/no/such/datastore"); err == nil || errors.Is(err, ErrNoBlockDevice) {
		t.Fatalf("DeviceOf of a missing directory: %v", err)
	}
}

func TestMeterSkipsIdleAndRestartedCounters(t *testing.T) {
	for _, c := range []struct {
		prev, cur Counters
		want      time.Duration
		ok        bool
	}{
		{Counters{10, 100 * time.Millisecond}, Counters{20, 300 * time.Millisecond}, 20 * time.Millisecond, true},
		{Counters{10, 100 * time.Millisecond}, Counters{10, 100 * time.Millisecond}, 0, false}, // idle
		{Counters{10, 100 * time.Millisecond}, Counters{3, 10 * time.Millisecond}, 0, false},   // restarted
	} {
		got, ok := Latency(c.prev, c.cur)
		if got != c.want || ok != c.ok {
			t.Errorf("Latency(%+v, %+v) = %s %v, want %s %v", c.prev, c.cur, got, ok, c.want, c.ok)
		}
	}
}
