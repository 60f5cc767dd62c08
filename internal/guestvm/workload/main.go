// Command workload is PID 1's payload in coffer's test and demo guests. It
// writes self-verifying blocks (see guestvm.FillBlock) to the guest's disk:
//
//	coffer.mode=write   first boot: base dataset, then random writes forever;
//	                    later boots (a restored or restarted VM) verify
//	                    the disk first, like check
//	coffer.mode=check   verify the disk (after a restore), then keep writing
//
// Every write is followed by a read of a random base block, verified: a VM
// running from a backup (instant recovery) keeps reading from it.
//
//	coffer.mode=idle    do nothing
//	coffer.mode=boot    boot as the disk's first byte says (boot.go), after
//	                    mounting coffer.root when given
//
// Progress goes to the console as "COFFER ..." lines tests wait for.
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coffer-backup/coffer/internal/guestvm"
)

func main() {
	args := map[string]string{"coffer.mode": "write", "coffer.disk": "/dev/vda", "coffer.base": "64", "coffer.interval": "50"}
	if b, err := os.ReadFile("/proc/cmdline"); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if k, v, ok := strings.Cut(f, "="); ok && strings.HasPrefix(k, "coffer.") {
				args[k] = v
			}
		}
	}
	if args["coffer.mode"] == "boot" {
		boot(args["coffer.disk"], args["coffer.root"])
	}
	if args["coffer.mode"] == "idle" {
		fmt.Println("COFFER IDLE")
		// Not select{}: with no other goroutine the runtime calls that a
		// deadlock and exits, and PID 1 exiting panics the kernel.
		for {
			time.Sleep(time.Hour)
		}
	}
	f, err := os.OpenFile(args["coffer.disk"], os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		fail("open disk: %v", err)
	}
	size, _ := f.Seek(0, 2)
	nblocks := uint64(size / guestvm.BlockSize)
	// O_DIRECT needs aligned memory: an anonymous mapping is page-aligned.
	buf, err := syscall.Mmap(-1, 0, guestvm.BlockSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		fail("mmap: %v", err)
	}
	base, _ := strconv.ParseUint(args["coffer.base"], 10, 64)
	if _, err := f.ReadAt(buf, 0); err != nil {
		fail("read header: %v", err)
	}
	if b, ok := guestvm.HeaderBase(buf); ok || args["coffer.mode"] == "check" {
		rep, err := guestvm.CheckDisk(f, size)
		if err != nil {
			fail("CHECK %v", err)
		}
		base = b
		fmt.Printf("COFFER CHECK OK base=%d written=%d maxseq=%d\n", rep.Base, rep.Written, rep.MaxSeq)
	} else {
		for i := uint64(1); i <= base; i++ {
			guestvm.FillBlock(buf, i, 0)
			if _, err := f.WriteAt(buf, int64(i)*guestvm.BlockSize); err != nil {
				fail("write base: %v", err)
			}
		}
		guestvm.FillHeader(buf, base)
		if _, err := f.WriteAt(buf, 0); err != nil {
			fail("write header: %v", err)
		}
	}
	if err := f.Sync(); err != nil {
		fail("sync: %v", err)
	}
	fmt.Printf("COFFER READY base=%d blocks=%d\n", base, nblocks)
	ms, _ := strconv.Atoi(args["coffer.interval"])
	seq := uint64(time.Now().UnixNano()) // distinct from earlier boots' sequences
	var latSum, latMax time.Duration
	for n := 1; ; n++ {
		seq++
		idx := base + 1 + rand.Uint64N(nblocks-base-1)
		guestvm.FillBlock(buf, idx, seq)
		began := time.Now()
		if _, err := f.WriteAt(buf, int64(idx)*guestvm.BlockSize); err != nil {
			fmt.Printf("COFFER WRITE-ERROR %v\n", err)
		}
		lat := time.Since(began)
		latSum += lat
		latMax = max(latMax, lat)
		if base > 0 {
			idx := 1 + rand.Uint64N(base)
			if _, err := f.ReadAt(buf, int64(idx)*guestvm.BlockSize); err != nil {
				fmt.Printf("COFFER READ-ERROR %v\n", err)
			} else if seq, ok := guestvm.CheckBlock(buf, idx); !ok || seq != 0 {
				fmt.Printf("COFFER READ-MISMATCH block %d\n", idx)
			}
		}
		if n%16 == 0 {
			// Write latency of the last 16 writes: what a backup costs the guest.
			fmt.Printf("COFFER WROTE %d lat_avg_us=%d lat_max_us=%d\n", n, (latSum / 16).Microseconds(), latMax.Microseconds())
			latSum, latMax = 0, 0
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
}

func fail(format string, a ...any) {
	fmt.Printf("COFFER FAIL "+format+"\n", a...)
	select {}
}
