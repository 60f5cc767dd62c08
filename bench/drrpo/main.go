// Command drrpo measures the RPO a scheduled replication keeps (issue 40):
// the lag of a standby behind its source while the source is written
// steadily, backed up and replicated on the same schedule, scaled down:
//
//	go run ./bench/drrpo                      # a 5-minute schedule at 1/50: every 6s, for 2 minutes
//	go run ./bench/drrpo -every 12s -for 4m
//
// The source is a 64 MiB raw disk image that a writer rewrites steadily
// (64 KiB every 50 ms, fsynced): a stand-in for a guest's disk, not a
// guest. A `coffer server` (the binary built from this tree) runs the
// replication with `schedule: "@every EVERY"`; the benchmark backs the
// image up every EVERY (`coffer backup disk`, as a policy on the same
// schedule would) and samples `coffer replicas --json` every second: the
// lag is how long ago the instant of the backup point the standby's
// newest point equals was. Needs qemu-img and qemu-nbd.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/coffer-backup/coffer/bench/benchutil"
	"github.com/coffer-backup/coffer/internal/api"
)

func main() {
	every := flag.Duration("every", 6*time.Second, "the backup and replication schedule (5 minutes at 1/50: 6s)")
	span := flag.Duration("for", 2*time.Minute, "how long to measure")
	flag.Parse()
	work, err := os.MkdirTemp("", "drrpo-")
	benchutil.Check(err)
	benchutil.AtExit(func() { _ = os.RemoveAll(work) })
	bin := filepath.Join(work, "coffer")
	benchutil.Run("go", "build", "-o", bin, "./cmd/coffer")
	env := append(os.Environ(), "COFFER_REPO="+filepath.Join(work, "repo"), "COFFER_PASSWORD=bench",
		"COFFER_CONFIG="+filepath.Join(work, "coffer.yaml"), "COFFER_CATALOG="+filepath.Join(work, "catalog.db"),
		"COFFER_STATE_DIR="+filepath.Join(work, "state"))
	coffer := func(args ...string) []byte {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			benchutil.Fatalf("coffer %v: %v", args, err)
		}
		return out
	}
	cfg := fmt.Sprintf(`connections:
  - {name: dr, kind: qemu, options: {sockets: [%q]}}
replications:
  - {name: web-dr, vms: [web], connection: dr, directory: %q, keep: 3, schedule: "@every %s"}
`, filepath.Join(work, "none", "*.qmp"), filepath.Join(work, "dr"), every.String())
	benchutil.Check(os.WriteFile(filepath.Join(work, "coffer.yaml"), []byte(cfg), 0o600))
	coffer("init")
	img := filepath.Join(work, "web.img")
	benchutil.Check(os.WriteFile(img, make([]byte, 64<<20), 0o600))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go write(ctx, img)
	coffer("backup", "disk", img, "--name", "web")

	srv := exec.Command(bin, "server", "--listen", "127.0.0.1:0")
	srv.Env = env
	benchutil.Check(srv.Start())
	benchutil.AtExit(func() { _ = srv.Process.Kill(); _ = srv.Wait() })

	var lags []float64
	start := time.Now()
	nextBackup := start.Add(*every)
	for time.Since(start) < *span {
		if time.Now().After(nextBackup) {
			coffer("backup", "disk", img, "--name", "web")
			nextBackup = nextBackup.Add(*every)
		}
		var rs []api.Replica
		benchutil.Check(json.Unmarshal(coffer("replicas", "--json"), &rs))
		if len(rs) == 1 && len(rs[0].Points) > 0 {
			lags = append(lags, time.Since(rs[0].SourceTime).Seconds())
		}
		time.Sleep(time.Second) // the sampling pace
	}
	if len(lags) == 0 {
		benchutil.Fatalf("the standby never had a point in %s", *span)
	}
	slices.Sort(lags)
	at := func(q float64) float64 { return lags[min(len(lags)-1, int(q*float64(len(lags))))] }
	fmt.Printf("schedule every %s for %s; %d samples; load %s\n", *every, *span, len(lags), benchutil.LoadAverage())
	fmt.Printf("lag (RPO)\tmedian %.1fs (%.2f schedules)\tp95 %.1fs (%.2f)\tmax %.1fs (%.2f)\n",
		at(0.5), at(0.5)/every.Seconds(), at(0.95), at(0.95)/every.Seconds(), lags[len(lags)-1], lags[len(lags)-1]/every.Seconds())
}

// write rewrites the image steadily, 64 KiB every 50 ms, until ctx ends.
func write(ctx context.Context, img string) {
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	benchutil.Check(err)
	defer func() { _ = f.Close() }()
	block := make([]byte, 64<<10)
	for off := int64(0); ctx.Err() == nil; off = (off + int64(len(block))) % (64 << 20) {
		_, _ = rand.Read(block)
		if _, err := f.WriteAt(block, off); err != nil {
			return
		}
		_ = f.Sync()
		time.Sleep(50 * time.Millisecond) // the writer's pace
	}
}
