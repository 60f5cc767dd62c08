package fleetadopt

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m) }

// TestReupload runs rounds of Run on each backend and logs, per round,
// the bytes the retry stored again as a share of what the killed attempt
// stored (the target: at most 10% with a kill at 50%), and how
// long the leader took to end the lost worker's session.
// COFFER_BENCH_ROUNDS sets the rounds (default 3).
func TestReupload(t *testing.T) {
	if os.Getenv("COFFER_BENCH") != "1" {
		t.Skip("a benchmark: set COFFER_BENCH=1")
	}
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("COFFER_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for _, s3 := range []bool{false, true} {
		name := "local"
		if s3 {
			name = "s3"
		}
		for i := range rounds {
			t.Run(name+"-"+strconv.Itoa(i+1), func(t *testing.T) {
				start := time.Now()
				r := Run(t, Options{S3: s3, KillAt: 0.5, DiskSize: "64MiB", ReadDelay: 10 * time.Millisecond})
				_, took, _ := strings.Cut(r.Adopted, "took=")
				t.Logf("| %s | %d | %.1f MiB | %.1f MiB (%.0f%%) | %.1f MiB | %.1f MiB | %.1f%% | %s | %s |", name, i+1,
					mib(r.Disk), mib(r.LostRaw), 100*float64(r.LostRaw)/float64(r.Disk), mib(r.RetryRaw), mib(r.AgainRaw),
					100*r.Ratio(), took, time.Since(start).Round(time.Second))
			})
		}
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
