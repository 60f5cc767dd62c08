package main

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
)

// measure is one coffer process's cost, or the summary of several runs
// of one step (summarise).
type measure struct {
	wall, cpu, otherCPU time.Duration
	maxRSS              int64 // bytes; of a summary, the median
	minRSS              int64 // of a summary, the smallest peak RSS
	stdout              string
}

// summarise reports the median run by peak RSS with the smallest peak RSS
// of all: the machine is shared, so one run's figure is noisy.
func summarise(ms []measure) measure {
	sorted := slices.Clone(ms)
	slices.SortFunc(sorted, func(a, b measure) int { return cmp.Compare(a.maxRSS, b.maxRSS) })
	m := sorted[len(sorted)/2]
	m.minRSS = sorted[0].maxRSS
	walls := make([]time.Duration, len(ms))
	for i, x := range ms {
		walls[i] = x.wall
	}
	slices.Sort(walls)
	m.wall = walls[len(walls)/2]
	return m
}

// pristine keeps a copy of the repository in dir before the first gc
// round, and puts it back before every later one.
func pristine(dir string, round int) error {
	keep := dir + ".pristine"
	if round == 0 {
		if repeat < 2 {
			return nil
		}
		return exec.Command("cp", "-a", dir, keep).Run()
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return exec.Command("cp", "-a", keep, dir).Run()
}

// run waits for an idle machine, then runs coffer with args under
// /usr/bin/time and measures it. Not wait4 on a child of this process: Go
// starts children with vfork semantics (the child shares this process's
// memory until it execs), and the kernel then reports this process's peak
// RSS as the child's when it is larger, which it is after generating a big
// repository.
func run(bin string, env []string, args ...string) (measure, error) {
	waitIdle()
	// The binary's pages in the page cache, as on a machine that runs it
	// regularly: how many of them a run maps depends on it (fault-around).
	_, _ = os.ReadFile(bin)
	tf, err := os.CreateTemp("", "gcmem-time-*")
	if err != nil {
		return measure{}, err
	}
	tf.Close()
	defer os.Remove(tf.Name())
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%U %S %M", "-o", tf.Name(), bin}, args...)...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	busy0 := busyCPU()
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	busy1 := busyCPU()
	if err != nil {
		return measure{}, fmt.Errorf("coffer %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	out, err := os.ReadFile(tf.Name())
	if err != nil {
		return measure{}, err
	}
	var usr, sys float64
	var rssKiB int64
	if _, err := fmt.Sscanf(string(out), "%f %f %d", &usr, &sys, &rssKiB); err != nil {
		return measure{}, fmt.Errorf("/usr/bin/time wrote %q: %v", out, err)
	}
	cpu := time.Duration((usr + sys) * float64(time.Second))
	return measure{wall: wall, cpu: cpu, otherCPU: max(busy1-busy0-cpu, 0), maxRSS: rssKiB << 10, stdout: stdout.String()}, nil
}

// hasFlag reports whether `coffer cmd --help` lists flag.
func hasFlag(bin, cmd, flag string) bool {
	out, _ := exec.Command(bin, cmd, "--help").CombinedOutput()
	return bytes.Contains(out, []byte(flag+" "))
}

// busyCPU is the CPU time all processes of the machine have used (the
// busy columns of /proc/stat, in USER_HZ of 10 ms).
func busyCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} { // user nice system irq softirq
		if i < len(f) {
			n, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// idleWait bounds waitIdle.
var idleWait = time.Minute

// waitIdle waits (at most idleWait) until the machine's CPUs were at least
// 90% idle for two seconds in a row: other sessions share it.
func waitIdle() {
	ok := 0
	for deadline := time.Now().Add(idleWait); time.Now().Before(deadline); {
		b0, t0 := busyCPU(), time.Now()
		time.Sleep(time.Second) // sampling /proc/stat, not synchronisation
		busy := (busyCPU() - b0).Seconds()
		capacity := time.Since(t0).Seconds() * float64(numCPU())
		if busy <= 0.1*capacity {
			if ok++; ok == 2 {
				return
			}
		} else {
			ok = 0
		}
	}
	log.Printf("machine not idle after %s; measuring anyway (see other CPU s)", idleWait)
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/stat")
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "cpu") && !strings.HasPrefix(l, "cpu ") {
			n++
		}
	}
	return max(n, 1)
}

// restoreCheck restores disk 0 of the newest point with coffer restore and
// compares it, span by span, with the generator's description.
func restoreCheck(bin string, env []string, work string, syn repotest.Synthetic, points int) error {
	out := filepath.Join(work, "restored.raw")
	defer os.Remove(out)
	if _, err := run(bin, env, "restore", "latest", "--disk", "0", "--to", out, "--overwrite"); err != nil {
		return err
	}
	f, err := os.Open(out)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	got, want := make([]byte, repo.MinChunkSize), make([]byte, repo.MinChunkSize)
	for i := range syn.Spans() {
		if _, err := io.ReadFull(r, got); err != nil {
			return fmt.Errorf("restore check: span %d: %w", i, err)
		}
		if !bytes.Equal(got, syn.Span(want, points-1, 0, i)) {
			return fmt.Errorf("restore check: span %d of disk 0 of the newest point differs from what was generated", i)
		}
	}
	if n, _ := r.Read(got[:1]); n != 0 {
		return fmt.Errorf("restore check: the restored disk is longer than %d spans", syn.Spans())
	}
	return nil
}
