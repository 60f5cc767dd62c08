// Command copyoffload measures `coffer copy` between two repositories
// that share their master key, with the copy offload (whole packs cloned
// or copied server-side by the storage) and with its fallback
// (--no-offload: every chunk read and written through coffer):
//
//	go run ./bench/copyoffload               # 1 GiB of random data
//	go run ./bench/copyoffload -size 256MiB
//
// Two pairs: two local repositories on one loop-mounted XFS (reflink=1),
// and two prefixes of one bucket of a local S3 server (versitygw). Bytes
// through the host are, locally, this process's read and write calls
// (/proc/self/io rchar + wchar) and the XFS loop device's written sectors
// (/sys/block/*/stat, after a syncfs); on S3, the body bytes that pass
// through a counting proxy between coffer and the server. Needs root,
// loop devices, xfsprogs and versitygw (.cache/bin).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
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
	"github.com/coffer-backup/coffer/internal/testutil"
)

func main() {
	sizeFlag := flag.String("size", "1GiB", "random data backed up and then copied")
	flag.Parse()
	size, err := config.ParseSize(*sizeFlag)
	benchutil.Check(err)
	dir, err := os.MkdirTemp("", "coffer-bench-copyoffload-")
	benchutil.Check(err)
	benchutil.AtExit(func() { os.RemoveAll(dir) })
	img := filepath.Join(dir, "disk.raw")
	writeImage(img, size)

	os.Setenv("COFFER_PASSWORD", "bench")
	os.Setenv("COFFER_TO_PASSWORD", "bench")
	os.Setenv("COFFER_CATALOG", filepath.Join(dir, "catalog.db"))
	os.Setenv("COFFER_CONFIG", filepath.Join(dir, "none.yaml"))
	os.Setenv("COFFER_CACHE_DIR", filepath.Join(dir, "cache"))
	benchutil.Check(os.WriteFile(os.Getenv("COFFER_CONFIG"), nil, 0o600))

	// Local: both repositories on one XFS with reflinks.
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
	stat := "/sys/block/" + filepath.Base(dev) + "/stat"
	var rows []row
	src := filepath.Join(mnt, "src")
	prepare(src, img)
	for _, noOffload := range []bool{false, true} {
		dst := filepath.Join(mnt, fmt.Sprintf("dst-%v", noOffload))
		target(src, dst)
		syncfs(mnt)
		io0, dev0 := procIO(), deviceBytes(stat)
		start := time.Now()
		res := copyTo(dst, noOffload)
		syncfs(mnt)
		rows = append(rows, row{"two local repositories, one XFS (reflink)", res, time.Since(start), procIO() - io0, deviceBytes(stat) - dev0})
	}

	// S3: two prefixes of one bucket, through a counting proxy.
	bin, err := exec.LookPath("versitygw")
	if err != nil {
		bin = filepath.Join(".cache", "bin", "versitygw")
	}
	srv, stop, err := testutil.LaunchS3(bin, filepath.Join(dir, "server"))
	benchutil.Check(err)
	benchutil.AtExit(stop)
	proxy, stopProxy, err := testutil.NewFaultProxy(srv.Endpoint, 1)
	benchutil.Check(err)
	benchutil.AtExit(stopProxy)
	bucket, err := srv.CreateBucket(context.Background(), false)
	benchutil.Check(err)
	for k, v := range srv.Env() {
		os.Setenv(k, v)
	}
	os.Setenv("COFFER_S3_ENDPOINT", proxy.URL)
	src = "s3://" + bucket + "/src"
	prepare(src, img)
	for _, noOffload := range []bool{false, true} {
		dst := fmt.Sprintf("s3://%s/dst-%v", bucket, noOffload)
		target(src, dst)
		b0 := proxy.Bytes()
		start := time.Now()
		res := copyTo(dst, noOffload)
		rows = append(rows, row{"two prefixes of one S3 service (versitygw)", res, time.Since(start), proxy.Bytes() - b0, -1})
	}
	report(rows, size)
	benchutil.Exit(0)
}

type row struct {
	pair    string
	res     api.CopyResult
	elapsed time.Duration
	host    int64 // bytes through coffer
	device  int64 // bytes written to the local storage; -1 for S3
}

func report(rows []row, size int64) {
	log.Printf("load average: %s", benchutil.LoadAverage())
	fmt.Printf("\n| pair | path | packs copied whole | written to the target | time | bytes through coffer | written to the XFS device |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		path := "fallback (--no-offload): streamed"
		if r.res.Offload.PacksAdopted > 0 {
			path = "offloaded: " + r.res.Offload.Method
		}
		devb := "n/a"
		if r.device >= 0 {
			devb = human(r.device)
		}
		fmt.Printf("| %s | %s | %d | %s | %.2f s | %s | %s |\n", r.pair, path, r.res.Offload.PacksAdopted, human(r.res.WrittenBytes),
			r.elapsed.Seconds(), human(r.host), devb)
	}
	fmt.Println()
	for i := 0; i+1 < len(rows); i += 2 {
		off, fb := rows[i], rows[i+1]
		fmt.Printf("%s: offloaded, %.5fx the fallback's bytes through coffer (%.2f%% fewer), in %.3fx its time\n",
			off.pair, ratio(off.host, fb.host), 100*(1-ratio(off.host, fb.host)), off.elapsed.Seconds()/fb.elapsed.Seconds())
	}
	fmt.Printf("(%s of random data)\n", human(size))
}

// prepare makes the source repository and backs the image up into it.
func prepare(loc, img string) {
	os.Setenv("COFFER_REPO", loc)
	coffer("init")
	coffer("backup", "disk", img, "--name", "bench")
}

// target makes a repository at loc with the master key of src.
func target(src, loc string) {
	os.Setenv("COFFER_REPO", loc)
	coffer("init", "--copy-keys-from", src)
	os.Setenv("COFFER_REPO", src)
}

func copyTo(dst string, noOffload bool) api.CopyResult {
	args := []string{"copy", "--to", dst, "--json"}
	if noOffload {
		args = append(args, "--no-offload")
	}
	var res api.CopyResult
	benchutil.Check(json.Unmarshal([]byte(coffer(args...)), &res))
	return res
}

// coffer runs the CLI in this process, so that its reads and writes are
// this process's.
func coffer(args ...string) string {
	var out, errOut bytes.Buffer
	if code := cli.Execute(context.Background(), args, strings.NewReader(""), &out, &errOut); code != 0 {
		benchutil.Fatalf("coffer %v: exit %d: %s%s", args, code, out.String(), errOut.String())
	}
	return out.String()
}

func syncfs(dir string) {
	d, err := os.Open(dir)
	benchutil.Check(err)
	defer d.Close()
	benchutil.Check(unix.Syncfs(int(d.Fd())))
}

// deviceBytes is the loop device's sectors written, in bytes.
func deviceBytes(stat string) int64 {
	b, err := os.ReadFile(stat)
	benchutil.Check(err)
	n, err := strconv.ParseInt(strings.Fields(string(b))[6], 10, 64)
	benchutil.Check(err)
	return n * 512
}

// procIO is this process's bytes through read and write calls.
func procIO() int64 {
	f, err := os.Open("/proc/self/io")
	benchutil.Check(err)
	defer f.Close()
	var n int64
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, _ := strings.Cut(s.Text(), ": ")
		if k == "rchar" || k == "wchar" {
			x, err := strconv.ParseInt(v, 10, 64)
			benchutil.Check(err)
			n += x
		}
	}
	return n
}

// writeImage writes size bytes of random data (incompressible, no
// duplicates: every chunk is a new chunk).
func writeImage(path string, size int64) {
	f, err := os.Create(path)
	benchutil.Check(err)
	defer f.Close()
	w := bufio.NewWriterSize(f, 4<<20)
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		for i := 0; i < len(buf); i += 8 {
			v := rng.Uint64()
			for j := range 8 {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		_, err := w.Write(buf[:min(int64(len(buf)), size-off)])
		benchutil.Check(err)
	}
	benchutil.Check(w.Flush())
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func human(b int64) string { return config.HumanBytes(b) }
