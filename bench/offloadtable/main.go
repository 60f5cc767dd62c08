// Command offloadtable measures the offload table of issue 17 (the seed's
// "load on SAN" table): for each storage primitive coffer offloads, the
// time and the bytes that pass through the host, offloaded and with the
// fallback (restore --no-offload), on one loop-mounted XFS (reflink=1):
//
//	go run ./bench/offloadtable                # a 4 GiB thick image, 1 GiB of it data
//	go run ./bench/offloadtable -size 1G
//	go run ./bench/offloadtable -image .cache/bench/disk.raw
//
// Rows: block zero onto a sparse file (holes) and onto a block device (a
// loop device on the XFS: fallocate ZERO_RANGE, which the loop driver
// passes down as a zero range of its file), and full copy (restore
// --copies: FICLONE against copying through coffer). Bytes written to the
// storage are the XFS's loop device's written sectors (/sys/block/*/stat)
// across the operation, after a syncfs; bytes coffer wrote are the
// process's write calls (/proc/self/io wchar). Needs root, loop devices
// and xfsprogs.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/bench/benchutil"
	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/offload"
)

func main() {
	sizeFlag := flag.String("size", "4GiB", "size of the synthetic image (a quarter of it data)")
	image := flag.String("image", "", "use this image instead of a synthetic one (bench/data.sh's disk.raw)")
	flag.Parse()
	size, err := config.ParseSize(*sizeFlag)
	benchutil.Check(err)
	dir, err := os.MkdirTemp("", "coffer-bench-offloadtable-")
	benchutil.Check(err)
	benchutil.AtExit(func() { os.RemoveAll(dir) })

	img := *image
	if img == "" {
		img = filepath.Join(dir, "disk.raw")
		writeImage(img, size)
	} else if fi, err := os.Stat(img); err == nil {
		size = fi.Size()
	} else {
		benchutil.Fatalf("%v", err)
	}
	nonZero := nonZeroBytes(img)
	log.Printf("image %s: %s, %s of it not zero", img, human(size), human(nonZero))

	// The repository lives outside the measured filesystem.
	os.Setenv("COFFER_REPO", filepath.Join(dir, "repo"))
	os.Setenv("COFFER_PASSWORD", "bench")
	os.Setenv("COFFER_CATALOG", filepath.Join(dir, "catalog.db"))
	os.Setenv("COFFER_CONFIG", filepath.Join(dir, "none.yaml"))
	benchutil.Check(os.WriteFile(os.Getenv("COFFER_CONFIG"), nil, 0o600))
	coffer("init")
	coffer("backup", "disk", img, "--name", "bench")

	// The datastore: an XFS with reflinks, twice the image and room for
	// a fully written restore.
	mnt := filepath.Join(dir, "mnt")
	xfsImg := filepath.Join(dir, "xfs.img")
	benchutil.Check(os.Mkdir(mnt, 0o755))
	f, err := os.Create(xfsImg)
	benchutil.Check(err)
	benchutil.Check(f.Truncate(4*size + 1<<30))
	f.Close()
	benchutil.Run("mkfs.xfs", "-q", "-m", "reflink=1", xfsImg)
	benchutil.Run("mount", "-o", "loop", xfsImg, mnt)
	benchutil.AtExit(func() { exec.Command("umount", mnt).Run() })
	dev := strings.TrimSpace(benchutil.Output("findmnt", "-n", "-o", "SOURCE", mnt))
	meter := &meter{mnt: mnt, stat: "/sys/block/" + filepath.Base(dev) + "/stat"}

	var rows []row
	// Block zero onto a sparse file: holes against zeros written.
	for _, noOffload := range []bool{false, true} {
		target := filepath.Join(mnt, fmt.Sprintf("file-%v.raw", noOffload))
		var d api.RestoredDisk
		m := meter.measure(func() { d = restore(target, noOffload) })
		rows = append(rows, row{"block zero, onto a file", path(noOffload, "holes", "zeros written"), m, d.ZeroBytes, d.WrittenBytes})
	}
	// Block zero onto a block device (a loop device over a file of the
	// XFS): the device's zeroing against zeros written.
	for _, noOffload := range []bool{false, true} {
		backing := filepath.Join(mnt, fmt.Sprintf("device-%v.img", noOffload))
		bf, err := os.Create(backing)
		benchutil.Check(err)
		benchutil.Check(bf.Truncate(size))
		bf.Close()
		loop := strings.TrimSpace(benchutil.Output("losetup", "--find", "--show", backing))
		var d api.RestoredDisk
		m := meter.measure(func() { d = restore(loop, noOffload) })
		benchutil.Run("losetup", "-d", loop)
		rows = append(rows, row{"block zero, onto a block device", path(noOffload, "device zeroing (ZERO_RANGE)", "zeros written"), m, d.ZeroBytes,
			d.WrittenBytes})
	}
	// Full copy of the restored disk: clone against copying.
	src := filepath.Join(mnt, "file-false.raw")
	for _, noOffload := range []bool{false, true} {
		var st offload.CopyStats
		m := meter.measure(func() {
			var err error
			st, err = offload.CopyFile(context.Background(), src, filepath.Join(mnt, fmt.Sprintf("copy-%v.raw", noOffload)),
				offload.CopyOptions{NoOffload: noOffload})
			benchutil.Check(err)
		})
		rows = append(rows, row{"full copy (restore --copies)", path(noOffload, string(st.Method), string(st.Method)), m, st.DataBytes, 0})
	}
	report(rows, size, nonZero)
	benchutil.Exit(0)
}

type row struct {
	primitive, path string
	m               measured
	handled         int64 // the bytes the primitive was asked to handle
	data            int64 // bytes the operation writes besides the primitive's (a restore's data)
}

// primitiveBytes is what the primitive itself wrote to the storage.
func (r row) primitiveBytes() int64 { return max(r.m.device-r.data, 0) }

func path(noOffload bool, offloaded, fallback string) string {
	if noOffload {
		return "fallback: " + fallback
	}
	return "offloaded: " + offloaded
}

// report prints the table and, per primitive, the offloaded path's host
// bytes against the fallback's.
func report(rows []row, size, nonZero int64) {
	fmt.Printf("\n| primitive | path | bytes handled | time | written to the storage | of it by the primitive | written by coffer |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %.2f s | %s | %s | %s |\n", r.primitive, r.path, human(r.handled), r.m.elapsed.Seconds(),
			human(r.m.device), human(r.primitiveBytes()), human(r.m.written))
	}
	fmt.Println()
	for i := 0; i+1 < len(rows); i += 2 {
		off, fb := rows[i], rows[i+1]
		fmt.Printf("%s: offloaded, the primitive wrote %.5fx the fallback's bytes to the storage (%.2f%% fewer); the operation took %.2fx the fallback's time\n",
			off.primitive, ratio(off.primitiveBytes(), fb.primitiveBytes()), 100*(1-ratio(off.primitiveBytes(), fb.primitiveBytes())),
			off.m.elapsed.Seconds()/fb.m.elapsed.Seconds())
	}
	sparse := rows[0].m.device
	fmt.Printf("sparse restore of the %s image: %s written to the storage for %s not zero (%+.2f%%; target at most +1%%)\n",
		human(size), human(sparse), human(nonZero), 100*(ratio(sparse, nonZero)-1))
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// measured is what one operation cost.
type measured struct {
	elapsed         time.Duration
	device, written int64
}

type meter struct{ mnt, stat string }

// measure runs op between two syncs of the filesystem: what op left in
// the page cache is counted as written by it.
func (m *meter) measure(op func()) measured {
	m.sync()
	dev0, w0 := m.deviceBytes(), wchar()
	start := time.Now()
	op()
	m.sync()
	return measured{elapsed: time.Since(start), device: m.deviceBytes() - dev0, written: wchar() - w0}
}

func (m *meter) sync() {
	d, err := os.Open(m.mnt)
	benchutil.Check(err)
	defer d.Close()
	benchutil.Check(unix.Syncfs(int(d.Fd())))
}

// deviceBytes is the loop device's sectors written (field 7 of
// /sys/block/<dev>/stat), in bytes.
func (m *meter) deviceBytes() int64 {
	b, err := os.ReadFile(m.stat)
	benchutil.Check(err)
	f := strings.Fields(string(b))
	n, err := strconv.ParseInt(f[6], 10, 64)
	benchutil.Check(err)
	return n * 512
}

// wchar is the bytes this process passed to write calls (/proc/self/io).
func wchar() int64 {
	f, err := os.Open("/proc/self/io")
	benchutil.Check(err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			benchutil.Check(err)
			return n
		}
	}
	benchutil.Fatalf("no wchar in /proc/self/io")
	return 0
}

func restore(target string, noOffload bool) api.RestoredDisk {
	args := []string{"restore", "latest", "--to", target, "--json"}
	if noOffload {
		args = append(args, "--no-offload")
	}
	var res []api.RestoredDisk
	benchutil.Check(json.Unmarshal([]byte(coffer(args...)), &res))
	return res[0]
}

// coffer runs the CLI in this process, so that its writes are this
// process's.
func coffer(args ...string) string {
	var out, errOut bytes.Buffer
	if code := cli.Execute(context.Background(), args, strings.NewReader(""), &out, &errOut); code != 0 {
		benchutil.Fatalf("coffer %v: exit %d: %s%s", args, code, out.String(), errOut.String())
	}
	return out.String()
}

// writeImage writes a thick image (every byte written, as a
// thick-provisioned disk): in each 4 MiB region, 1 MiB of random data
// and zeros after it.
func writeImage(path string, size int64) {
	f, err := os.Create(path)
	benchutil.Check(err)
	defer f.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	region := make([]byte, 4<<20)
	for off := int64(0); off < size; off += int64(len(region)) {
		for i := 0; i < 1<<20; i += 8 {
			v := rng.Uint64()
			for j := range 8 {
				region[i+j] = byte(v >> (8 * j))
			}
		}
		n := min(int64(len(region)), size-off)
		_, err := f.WriteAt(region[:n], off)
		benchutil.Check(err)
	}
	benchutil.Check(f.Sync())
}

// nonZeroBytes counts the image's 4 KiB blocks that are not all zero.
func nonZeroBytes(path string) int64 {
	f, err := os.Open(path)
	benchutil.Check(err)
	defer f.Close()
	var n int64
	buf := make([]byte, 4096)
	zero := make([]byte, 4096)
	r := bufio.NewReaderSize(f, 4<<20)
	for {
		k, err := io.ReadFull(r, buf)
		if k > 0 && !bytes.Equal(buf[:k], zero[:k]) {
			n += int64(k)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n
		}
		benchutil.Check(err)
	}
}

func human(b int64) string { return config.HumanBytes(b) }
