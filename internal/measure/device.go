// Package measure runs coffer's own benchmarks of the machine it runs on:
// a device's sequential throughput (read, write and both at once, as
// openBench measured with Iometer) and coffer's pipeline per core at each
// compression level; the planner (internal/plan) predicts with them.
package measure

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DeviceOptions say where and how much to measure.
type DeviceOptions struct {
	// Dir is a directory on the device (a datastore's mount, a
	// repository's target); two files of Size are written there and
	// removed.
	Dir string
	// Size is the bytes each pass moves (default 256 MiB).
	Size int64
	// Streams is the number of concurrent sequential streams (default
	// 4); the full-duplex pass reads with half and writes with the rest.
	Streams int
	// Block is each stream's I/O size (default 1 MiB).
	Block int
}

// MaxDeviceSize bounds the bytes of a pass.
const MaxDeviceSize = 64 << 30

// DeviceResult is a device's throughput, in bytes/s.
type DeviceResult struct {
	Dir     string
	Streams int
	Size    int64
	Read    float64
	Write   float64 // including the final fdatasync
	// DuplexRead and DuplexWrite are both directions at once, the way a
	// backup whose target shares the device (or its controller) runs.
	DuplexRead, DuplexWrite float64
}

// Duplex is the throughput of both directions together.
func (r DeviceResult) Duplex() float64 { return r.DuplexRead + r.DuplexWrite }

func (o *DeviceOptions) check() error {
	if o.Size == 0 {
		o.Size = 256 << 20
	}
	if o.Streams == 0 {
		o.Streams = 4
	}
	if o.Block == 0 {
		o.Block = 1 << 20
	}
	if o.Streams < 1 || o.Streams > 256 {
		return fmt.Errorf("measure: %d streams: give 1 to 256", o.Streams)
	}
	if o.Block < 4096 || o.Block > 64<<20 {
		return fmt.Errorf("measure: block of %d bytes: give 4 KiB to 64 MiB", o.Block)
	}
	if o.Size < int64(o.Streams)*int64(o.Block) {
		return fmt.Errorf("measure: %d bytes is less than one block per stream (%d × %d)", o.Size, o.Streams, o.Block)
	}
	if o.Size > MaxDeviceSize {
		return fmt.Errorf("measure: %d bytes: at most %d (64 GiB) a pass", o.Size, int64(MaxDeviceSize))
	}
	st, err := os.Stat(o.Dir)
	if err != nil {
		return fmt.Errorf("measure: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("measure: %s is not a directory: give a directory on the device to measure", o.Dir)
	}
	// Two files of Size are written: never fill the device to do it.
	var fs unix.Statfs_t
	if err := unix.Statfs(o.Dir, &fs); err != nil {
		return fmt.Errorf("measure: %w", err)
	}
	if free := int64(fs.Bavail) * int64(fs.Bsize); 2*o.Size > free/2 {
		return fmt.Errorf("measure: two files of %d bytes would take more than half of the %d bytes free on %s: give a smaller size", o.Size, free, o.Dir)
	}
	return nil
}

// Device measures a device through a directory on it: a write pass, a
// read pass of what was written (evicted from the page cache first), then
// reads and writes at once. The data is random, so that no layer
// compresses or deduplicates it away.
func Device(ctx context.Context, o DeviceOptions) (DeviceResult, error) {
	if err := o.check(); err != nil {
		return DeviceResult{}, err
	}
	res := DeviceResult{Dir: o.Dir, Streams: o.Streams, Size: o.Size}
	a, err := os.CreateTemp(o.Dir, ".coffer-bench-*")
	if err != nil {
		return res, fmt.Errorf("measure: %w", err)
	}
	defer func() { _ = os.Remove(a.Name()) }()
	defer func() { _ = a.Close() }() // a scratch file, removed
	b, err := os.Create(filepath.Join(o.Dir, filepath.Base(a.Name())+"-duplex"))
	if err != nil {
		return res, fmt.Errorf("measure: %w", err)
	}
	defer func() { _ = os.Remove(b.Name()) }()
	defer func() { _ = b.Close() }() // a scratch file, removed
	block := make([]byte, o.Block)
	fill(block)

	took, err := timed(func() error { return streams(ctx, a, o.Size, o.Streams, o.Block, block, true) })
	if err != nil {
		return res, err
	}
	res.Write = float64(o.Size) / took.Seconds()
	if took, err = timed(func() error { evict(a); return streams(ctx, a, o.Size, o.Streams, o.Block, nil, false) }); err != nil {
		return res, err
	}
	res.Read = float64(o.Size) / took.Seconds()

	evict(a)
	readers := max(o.Streams/2, 1)
	writers := max(o.Streams-readers, 1)
	var wg sync.WaitGroup
	var rTook, wTook time.Duration
	var rErr, wErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		rTook, rErr = timed(func() error { return streams(ctx, a, o.Size, readers, o.Block, nil, false) })
	}()
	go func() {
		defer wg.Done()
		wTook, wErr = timed(func() error { return streams(ctx, b, o.Size, writers, o.Block, block, true) })
	}()
	wg.Wait()
	if err := errors.Join(rErr, wErr); err != nil {
		return res, err
	}
	res.DuplexRead, res.DuplexWrite = float64(o.Size)/rTook.Seconds(), float64(o.Size)/wTook.Seconds()
	return res, nil
}

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return max(time.Since(start), time.Nanosecond), err
}

// streams moves size bytes of f in n concurrent sequential streams, each
// over its own contiguous part; writes end with one fdatasync.
func streams(ctx context.Context, f *os.File, size int64, n, blockSize int, block []byte, write bool) error {
	part := size / int64(n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for s := range n {
		from, to := int64(s)*part, int64(s+1)*part
		if s == n-1 {
			to = size
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, blockSize)
			copy(buf, block)
			for off := from; off < to; off += int64(blockSize) {
				if ctx.Err() != nil {
					errs[s] = ctx.Err()
					return
				}
				p := buf[:min(int64(blockSize), to-off)]
				var err error
				if write {
					// Every block differs (its offset in its first
					// bytes): nothing below can deduplicate them.
					binary.LittleEndian.PutUint64(buf, uint64(off))
					_, err = f.WriteAt(p, off)
				} else {
					_, err = f.ReadAt(p, off)
				}
				if err != nil {
					errs[s] = fmt.Errorf("measure: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if write {
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return fmt.Errorf("measure: fdatasync %s: %w", f.Name(), err)
		}
	}
	return nil
}

// evict drops a written and synced file from the page cache, so that
// the read pass reads the device (drop_caches needs root; this does not).
func evict(f *os.File) {
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

func fill(p []byte) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= len(p); i += 8 {
		v := r.Uint64()
		for k := range 8 {
			p[i+k] = byte(v >> (8 * k))
		}
	}
}
