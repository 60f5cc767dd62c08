package iolatency

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoBlockDevice: a directory is on a file system without a block
// device of its own (tmpfs, overlayfs, NFS, btrfs's anonymous device
// numbers), so the kernel keeps no I/O statistics for it.
var ErrNoBlockDevice = errors.New("no block device")

// Device is the block device holding a directory, in /proc/diskstats.
type Device struct {
	Major, Minor uint32
	Name         string // "vda", "loop3", "sda1"
}

// DeviceOf finds the block device of the file system dir is on: its
// st_dev, which /sys/dev/block/MAJ:MIN names when it is a real block
// device (a whole disk or a partition).
func DeviceOf(dir string) (Device, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return Device{}, fmt.Errorf("datastore %s: %w", dir, err)
	}
	d := Device{Major: unix.Major(st.Dev), Minor: unix.Minor(st.Dev)}
	uevent, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/uevent", d.Major, d.Minor))
	if err != nil {
		return Device{}, fmt.Errorf("datastore %s is on device %d:%d, which is %w (tmpfs, overlayfs, a network or btrfs file system): "+
			"its latency is seen only through the VMs' disks", dir, d.Major, d.Minor, ErrNoBlockDevice)
	}
	for _, l := range strings.Split(string(uevent), "\n") {
		if v, ok := strings.CutPrefix(l, "DEVNAME="); ok {
			d.Name = v
		}
	}
	if d.Name == "" {
		d.Name = fmt.Sprintf("%d:%d", d.Major, d.Minor)
	}
	return d, nil
}

// DiskstatsPath is where the kernel's per-device counters are read.
const DiskstatsPath = "/proc/diskstats"

// Diskstats is a Source reading a block device's line of /proc/diskstats:
// reads and writes completed, and the milliseconds they took (fields 4,
// 8, 7 and 11; see the kernel's Documentation/admin-guide/iostats.rst).
// Discards and flushes are left out: their times say nothing about how
// long production's data requests waited.
type Diskstats struct {
	Dev  Device
	Path string // DiskstatsPath unless a test says otherwise
}

// Name implements Source.
func (d Diskstats) Name() string {
	return fmt.Sprintf("device %s (%d:%d)", d.Dev.Name, d.Dev.Major, d.Dev.Minor)
}

// Read implements Source.
func (d Diskstats) Read(context.Context) (Counters, error) {
	path := d.Path
	if path == "" {
		path = DiskstatsPath
	}
	f, err := os.Open(path)
	if err != nil {
		return Counters{}, err
	}
	defer func() { _ = f.Close() }() // read only
	want := [2]string{strconv.FormatUint(uint64(d.Dev.Major), 10), strconv.FormatUint(uint64(d.Dev.Minor), 10)}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 11 || fs[0] != want[0] || fs[1] != want[1] {
			continue
		}
		return ParseDiskstats(fs)
	}
	if err := sc.Err(); err != nil {
		return Counters{}, err
	}
	return Counters{}, fmt.Errorf("%s: no line for device %d:%d (removed?)", path, d.Dev.Major, d.Dev.Minor)
}

// ParseDiskstats reads the counters of one /proc/diskstats line split
// into fields (major, minor, name, then the statistics).
func ParseDiskstats(fs []string) (Counters, error) {
	if len(fs) < 11 {
		return Counters{}, fmt.Errorf("diskstats line with %d fields, want at least 11", len(fs))
	}
	var v [4]uint64
	for i, field := range []int{3, 7, 6, 10} { // reads, writes completed; ms reading, writing
		n, err := strconv.ParseUint(fs[field], 10, 64)
		if err != nil {
			return Counters{}, fmt.Errorf("diskstats %s field %d: %w", fs[2], field+1, err)
		}
		v[i] = n
	}
	return Counters{Ops: v[0] + v[1], Time: time.Duration(v[2]+v[3]) * time.Millisecond}, nil
}
