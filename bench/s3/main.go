// Command s3 benchmarks coffer's S3 backend against a local-disk repository
// on the same image: full backup, re-backup of a modified copy and restore,
// each timed, with the S3 requests they took (counted by a proxy in front
// of a local versitygw) per GiB of image.
//
//	go run ./bench/s3 -image /path/to/disk.img     # e.g. the repository benchmark's 4 GiB image
//	go run ./bench/s3                              # a generated 1 GiB image
//	go run ./bench/s3 -image IMG -restore-connections 2,4,8,16   # then restores at each S3 connection count
//
// Every restored image is compared with its source, and every command has
// a deadline (-step-timeout); a failure names the repository, the command,
// its exit code and its output, and a -work without room for the run is
// refused before it starts.
// versitygw must be on PATH or in .cache/bin (scripts/ci/install-s3.sh).
// The server's data lives in -work, next to the local repository, so both
// write to the same disk; the source image should be in the page cache
// (the benchmark reads it once before timing).
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coffer-backup/coffer/internal/cli"
	"github.com/coffer-backup/coffer/internal/testutil"
)

func main() {
	image := flag.String("image", "", "raw disk image to back up (default: generate one)")
	size := flag.Int64("size", 1<<30, "size of the generated image")
	work := flag.String("work", "bench/work/s3", "work directory (repositories, server data)")
	conns := flag.Int("connections", 8, "S3 connections (s3.connections)")
	sweep := flag.String("restore-connections", "", "after the table, restore again from S3 with each of these S3 connection counts (e.g. 4,8,16), alternated, and from local disk")
	sweepRounds := flag.Int("restore-rounds", 3, "rounds of -restore-connections")
	flag.DurationVar(&stepTimeout, "step-timeout", 30*time.Minute, "deadline of each backup, restore and peer command")
	flag.Parse()
	log.SetFlags(0)
	if err := os.RemoveAll(*work); err != nil {
		log.Fatal(err)
	}
	if err := os.MkdirAll(*work, 0o755); err != nil {
		log.Fatal(err)
	}
	if *image == "" {
		*image = filepath.Join(*work, "disk.img")
		if err := generate(*image, *size); err != nil {
			log.Fatal(err)
		}
	}
	if err := checkSpace(*image, *work); err != nil {
		log.Fatal(err)
	}
	modified := filepath.Join(*work, "modified.img")
	if err := modify(*image, modified); err != nil {
		log.Fatal(err)
	}
	fi, err := os.Stat(*image)
	if err != nil {
		log.Fatal(err)
	}
	gib := float64(fi.Size()) / (1 << 30)
	bin, err := exec.LookPath("versitygw")
	if err != nil {
		bin = filepath.Join(".cache", "bin", "versitygw")
	}
	srv, stop, err := testutil.LaunchS3(bin, filepath.Join(*work, "server"))
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	proxy, stopProxy, err := testutil.NewFaultProxy(srv.Endpoint, 1)
	if err != nil {
		log.Fatal(err)
	}
	defer stopProxy()
	bucket, err := srv.CreateBucket(context.Background(), false)
	if err != nil {
		log.Fatal(err)
	}
	for k, v := range srv.Env() {
		os.Setenv(k, v)
	}
	os.Setenv("COFFER_S3_ENDPOINT", proxy.URL)
	os.Setenv("COFFER_S3_CONNECTIONS", fmt.Sprint(*conns))
	os.Setenv("COFFER_PASSWORD", "benchmark")
	os.Setenv("COFFER_CONFIG", filepath.Join(*work, "none.yaml"))
	os.Setenv("COFFER_CATALOG", filepath.Join(*work, "catalog.db"))
	os.Setenv("COFFER_CACHE_DIR", filepath.Join(*work, "cache"))
	_ = os.WriteFile(filepath.Join(*work, "none.yaml"), nil, 0o600)

	repos := []struct{ name, loc string }{
		{"coffer, local disk", filepath.Join(*work, "repo")},
		{"coffer, S3 (versitygw)", "s3://" + bucket + "/repo"},
	}
	var res []result
	for ri, r := range repos {
		os.Setenv("COFFER_REPO", r.loc)
		run(r.name, "init")
		var out result
		restored := filepath.Join(*work, fmt.Sprintf("restored-%d.img", ri))
		for i, step := range [][]string{
			{"backup", "disk", *image, "--name", "bench"},
			{"backup", "disk", modified, "--name", "bench"},
			{"restore", "latest", "--to", restored},
		} {
			_ = readAll(step[len(step)-1]) // source in page cache
			before := proxy.Count()
			start := time.Now()
			run(r.name, step...)
			syncAll()
			out.steps[i] = time.Since(start)
			out.reqs[i] = proxy.Count() - before
		}
		// A restore that wrote other bytes is a failure, not a figure.
		if err := sameContents(modified, restored); err != nil {
			log.Fatalf("%s: the restored image differs from the modified copy it came from: %v", r.name, err)
		}
		_ = os.Remove(restored) // the disk space for the next repository
		res = append(res, out)
	}
	if *sweep != "" {
		restoreSweep(repos[0].loc, repos[1].loc, *sweep, *sweepRounds, filepath.Join(*work, "sweep.img"))
	}
	// The peers, on the same server through the same proxy.
	var s3env []string
	for k, v := range srv.Env() {
		if strings.HasPrefix(k, "AWS_") {
			s3env = append(s3env, k+"="+v)
		}
	}
	names := []string{}
	for _, r := range repos {
		names = append(names, r.name)
	}
	inputs := [3]string{*image, modified, ""}
	if bin := findTool("restic"); bin != "" {
		p := resticPeer(bin, proxy.URL, bucket, *work, *image, modified, s3env)
		steps, reqs := measure(p, func() int64 { return proxy.Count() }, readAll, inputs)
		res = append(res, result{steps, reqs})
		names = append(names, p.name+" (S3)")
	}
	if bin := findTool("kopia"); bin != "" {
		p := kopiaPeer(bin, proxy.URL, bucket, *work, *image, modified, srv.Env())
		steps, reqs := measure(p, func() int64 { return proxy.Count() }, readAll, inputs)
		res = append(res, result{steps, reqs})
		names = append(names, p.name+" (S3)")
	}
	fmt.Printf("image %s: %.2f GiB logical; %d S3 connections; ratios are against coffer on local disk\n\n", *image, gib, *conns)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "repository\tfull backup\tre-backup (modified)\trestore\trequests full\tper GiB\trequests re-backup\trequests restore\tper GiB\t")
	for i, name := range names {
		x := res[i]
		ratio := func(j int) string {
			return fmt.Sprintf("%.2f s (%.2fx)", x.steps[j].Seconds(), x.steps[j].Seconds()/res[0].steps[j].Seconds())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.0f\t%d\t%d\t%.0f\t\n", name, ratio(0), ratio(1), ratio(2),
			x.reqs[0], float64(x.reqs[0])/gib, x.reqs[1], x.reqs[2], float64(x.reqs[2])/gib)
	}
	tw.Flush()
}

type result struct {
	steps [3]time.Duration
	reqs  [3]int64
}

// stepTimeout bounds every command the benchmark runs (-step-timeout).
var stepTimeout time.Duration

// run runs coffer in this process on the repository named repoName and
// exits, naming the command, the repository and the deadline if it ran
// out, when it fails.
func run(repoName string, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	code := cli.Execute(ctx, append([]string{"--quiet"}, args...), strings.NewReader(""), &out, &errOut)
	if code == 0 {
		return
	}
	why := ""
	if ctx.Err() != nil {
		why = fmt.Sprintf(" (the step's deadline of %s ran out)", stepTimeout)
	}
	msg := strings.TrimSpace(out.String() + errOut.String())
	if msg == "" {
		msg = "(coffer printed nothing)"
	}
	log.Fatalf("%s: coffer %s: exit code %d%s\n%s", repoName, strings.Join(args, " "), code, why, msg)
}

func syncAll() { _ = exec.Command("sync").Run() }

func readAll(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}

// generate writes a sparse image: 40% of its MiBs hold data, one in four of
// them incompressible, the rest repetitive text.
func generate(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	text := bytes.Repeat([]byte("coffer benchmark: a line of a configuration file or a log, 0123456789\n"), 1<<20/70+1)[:1<<20]
	buf := make([]byte, 1<<20)
	for i := int64(0); i < size>>20; i++ {
		switch i % 10 {
		case 0:
			_, _ = rand.Read(buf)
		case 1, 2, 3:
			copy(buf, text)
			buf[i%4096] ^= byte(i) // distinct chunks
		default:
			continue
		}
		if _, err := f.WriteAt(buf, i<<20); err != nil {
			return err
		}
	}
	return f.Sync()
}

// modify copies src to dst and rewrites ~2% of its used MiBs in 64 KiB
// blocks, like the repository benchmark's modified copy.
func modify(src, dst string) error {
	if out, err := exec.Command("cp", "--sparse=always", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp: %v: %s", err, out)
	}
	f, err := os.OpenFile(dst, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	block := make([]byte, 64<<10)
	for off := int64(0); off < fi.Size(); off += 50 << 20 { // one MiB in 50, 16 blocks of 64 KiB
		for b := int64(0); b < 16; b++ {
			_, _ = rand.Read(block)
			if _, err := f.WriteAt(block, off+b*(64<<10)); err != nil {
				return err
			}
		}
	}
	return f.Sync()
}

// restoreSweep restores the latest point from the local repository and
// from S3 with each S3 connection count of counts (the restore's parallel
// ranged GETs: one per connection), alternated within each round so that
// other tenants' load falls on all of them alike, and prints the median
// S3 ÷ local-disk ratio of each count.
func restoreSweep(local, remote, counts string, rounds int, to string) {
	var conns []int
	for _, f := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			log.Fatalf("-restore-connections %q: %q is not a positive number", counts, f)
		}
		conns = append(conns, n)
	}
	restore := func(loc string, n int) float64 {
		os.Setenv("COFFER_REPO", loc)
		os.Setenv("COFFER_S3_CONNECTIONS", fmt.Sprint(n))
		start := time.Now()
		run(loc, "restore", "latest", "--to", to)
		syncAll()
		d := time.Since(start).Seconds()
		_ = os.Remove(to)
		return d
	}
	ratios := make([][]float64, len(conns))
	for r := range rounds {
		for k, n := range conns {
			l := restore(local, n)
			s3 := restore(remote, n)
			ratios[k] = append(ratios[k], s3/l)
			fmt.Printf("round %d: %d connections: S3 %.2f s, local %.2f s: %.2fx\n", r+1, n, s3, l, s3/l)
		}
	}
	fmt.Println("\nS3 restore ÷ local-disk restore, median of the rounds (min-max):")
	for k, n := range conns {
		x := slices.Clone(ratios[k])
		slices.Sort(x)
		fmt.Printf("  %2d connections: %.2fx (%.2f-%.2f)\n", n, x[len(x)/2], x[0], x[len(x)-1])
	}
}
