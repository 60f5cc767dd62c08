// Command gcmem measures whether garbage collection and verification keep
// their memory flat as a repository grows: it generates synthetic
// repositories of 10^5, 10^6 and 10^7 chunk references (internal/repo/
// repotest.Synthetic: 100 daily points of a 4-disk VM, 2% of the spans
// rewritten per point, real encrypted chunks of a few dozen bytes), runs
// the real coffer binary on each with the same --memory, and prints wall
// time, CPU and peak RSS (/usr/bin/time) of every step and the ratios of
// the largest repository's peak RSS to the smallest's.
//
//	go run ./bench/gcmem                                  # 1e5,1e6,1e7 references, --memory 64MiB
//	go run ./bench/gcmem -refs 1e5,1e6 -memory 16MiB     # quicker
//	go run ./bench/gcmem -repeat 1                       # each step once
//
// Steps on each repository, each its own coffer process:
//
//   - verify: the structural check (manifests, disk maps, index, packs);
//   - verify --read-data: every chunk read, decrypted and re-hashed;
//   - forget --keep-last K (not measured), so that gc has work: whole
//     packs to delete, partly dead packs to repack, a hundred segments to
//     compact;
//   - gc --memory M;
//   - verify --read-data again and a restore of one disk of the newest
//     point compared with what the generator says it holds (checks, not
//     measured).
//
// `coffer verify` gets --memory too when its --help lists the flag.
// The repositories use the smallest chunk size (64 KiB, so generation
// hashes little) and a fast key derivation (8 MiB of argon2id instead of
// 32 MiB, so that the key's memory does not hide the steps' own). The
// machine is shared: before each step the program waits for the CPUs to be
// idle and reports how much CPU other processes used during the step.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/store/local"
)

const password = "coffer-bench-password"

func main() {
	refsFlag := flag.String("refs", "1e5,1e6,1e7", "comma-separated numbers of chunk references")
	memory := flag.String("memory", "64MiB", "--memory given to gc (and to verify, when it has the flag)")
	dir := flag.String("dir", ".cache/bench/gcmem", "work directory (repositories are deleted after their run)")
	points := flag.Int("points", 100, "backup points per repository")
	disks := flag.Int("disks", 4, "disks per point")
	keep := flag.Int("keep", 50, "forget --keep-last before gc")
	coffer := flag.String("coffer", "", "coffer binary (default: built from this checkout into -dir)")
	restoreMax := flag.Int64("restore-max", 2<<30, "restore-check a disk only up to this many bytes")
	withVerify := flag.Bool("verify", true, "measure verify and verify --read-data too")
	flag.IntVar(&repeat, "repeat", 3, "measure each step this many times and report the minimum and median peak RSS (gc on a fresh copy of the repository each time)")
	flag.DurationVar(&idleWait, "idle-wait", time.Minute, "longest wait for an idle machine before each step")
	flag.Parse()
	ctx := context.Background()
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Fatal(err)
	}
	work, err := filepath.Abs(*dir)
	if err != nil {
		log.Fatal(err)
	}
	bin, built := *coffer, *coffer
	if bin == "" {
		bin = filepath.Join(work, "coffer")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/coffer").CombinedOutput(); err != nil {
			log.Fatalf("build coffer: %v\n%s", err, out)
		}
		rev, _ := exec.Command("git", "describe", "--always", "--dirty").Output()
		built = "this checkout, " + strings.TrimSpace(string(rev))
	}
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		log.Fatal("/usr/bin/time is needed to measure peak RSS: apt-get install time")
	}
	verifyMemory := hasFlag(bin, "verify", "--memory")
	var sizes []int64
	for _, s := range strings.Split(*refsFlag, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || f < 1 {
			log.Fatalf("-refs: %q is not a number", s)
		}
		sizes = append(sizes, int64(f))
	}
	var rows []row
	for _, n := range sizes {
		r, err := runSize(ctx, bin, work, n, *points, *disks, *keep, *memory, verifyMemory, *withVerify, *restoreMax)
		if err != nil {
			log.Fatalf("%d references: %v", n, err)
		}
		rows = append(rows, r)
	}
	fmt.Printf("coffer: %s; %d points of %d disks, forget --keep-last %d before gc\n", built, *points, *disks, *keep)
	report(rows, *memory, verifyMemory)
}

type row struct {
	refs, chunks, packs int64
	segments            int
	bytes               int64
	gen                 time.Duration
	steps               map[string]measure
	gcOut               string
}

var stepNames = []string{"verify", "verify --read-data", "gc"}

// repeat is how many times each measured step runs.
var repeat = 3

func runSize(ctx context.Context, bin, work string, n int64, points, disks, keep int, memory string, verifyMemory, withVerify bool, restoreMax int64) (row, error) {
	dir := filepath.Join(work, fmt.Sprintf("repo-%d", n))
	if err := os.RemoveAll(dir); err != nil {
		return row{}, err
	}
	defer os.RemoveAll(dir)
	st, err := local.Create(dir)
	if err != nil {
		return row{}, err
	}
	if _, err := repo.Init(ctx, st, repo.InitOptions{Password: []byte(password), KDF: repotest.FastKDF, ChunkSize: repo.MinChunkSize}); err != nil {
		return row{}, err
	}
	r, err := repo.Open(ctx, st, []byte(password), repo.Options{})
	if err != nil {
		return row{}, err
	}
	syn := repotest.Synthetic{Points: points, Disks: disks, References: n, Seed: 1}
	log.Printf("%d references: generating", n)
	start := time.Now()
	stats, err := syn.Generate(ctx, r)
	if err != nil {
		return row{}, err
	}
	out := row{refs: stats.References, chunks: stats.Chunks, packs: stats.Packs, segments: stats.Segments, bytes: stats.Bytes,
		gen: time.Since(start), steps: map[string]measure{}}
	env := append(os.Environ(), "COFFER_REPO="+dir, "COFFER_PASSWORD="+password, "COFFER_CONFIG=/dev/null",
		"COFFER_CATALOG="+filepath.Join(work, "catalog.db"))
	mem := []string{}
	if verifyMemory {
		mem = []string{"--memory", memory}
	}
	steps := []struct {
		name string
		args []string
	}{
		{"verify", append([]string{"verify"}, mem...)},
		{"verify --read-data", append([]string{"verify", "--read-data"}, mem...)},
		{"forget", []string{"forget", "--keep-last", strconv.Itoa(keep)}},
		{"gc", []string{"gc", "--memory", memory}},
		{"verify after gc", []string{"verify", "--read-data"}},
	}
	for _, s := range steps {
		if !withVerify && strings.HasPrefix(s.name, "verify") {
			continue
		}
		if s.name == "forget" {
			continue // run before each gc, below
		}
		rounds := repeat
		if s.name == "verify after gc" {
			rounds = 1 // a check, not measured
		}
		var ms []measure
		for round := range rounds {
			if s.name == "gc" {
				// gc changes the repository: each round collects the
				// same repository, copied before the first forget.
				if err := pristine(dir, round); err != nil {
					return out, err
				}
				if _, err := run(bin, env, "forget", "--keep-last", strconv.Itoa(keep)); err != nil {
					return out, err
				}
			}
			log.Printf("%d references: coffer %s (%d/%d)", n, strings.Join(s.args, " "), round+1, rounds)
			m, err := run(bin, env, s.args...)
			if err != nil {
				return out, err
			}
			ms = append(ms, m)
		}
		out.steps[s.name] = summarise(ms)
		if s.name == "gc" {
			out.gcOut = strings.TrimSpace(ms[0].stdout)
		}
	}
	os.RemoveAll(dir + ".pristine")
	if size := int64(syn.Spans()) * int64(repo.MinChunkSize); size <= restoreMax {
		if err := restoreCheck(bin, env, work, syn, points); err != nil {
			return out, err
		}
	}
	return out, nil
}

// printTable prints a Markdown table with aligned columns.
func printTable(t [][]string) {
	width := make([]int, len(t[0]))
	for _, line := range t {
		for i, c := range line {
			width[i] = max(width[i], len(c))
		}
	}
	for k, line := range t {
		for i, c := range line {
			fmt.Printf("| %-*s ", width[i], c)
		}
		fmt.Println("|")
		if k == 0 {
			for i := range line {
				fmt.Printf("|%s", strings.Repeat("-", width[i]+2))
			}
			fmt.Println("|")
		}
	}
}

func report(rows []row, memory string, verifyMemory bool) {
	fmt.Printf("coffer gc --memory %s", memory)
	if verifyMemory {
		fmt.Printf(" and coffer verify --memory %s", memory)
	}
	fmt.Printf("; peak RSS and CPU of the coffer process from /usr/bin/time, minimum and median of %d runs (wall and CPU: the median run's); other CPU s = CPU time other processes used during the step (shared machine).\n\n", repeat)
	table := [][]string{{"references", "distinct chunks", "packs", "segments", "repository MB", "generate s", "step", "wall s", "CPU s", "peak RSS MiB min/median", "other CPU s"}}
	for _, r := range rows {
		first := true
		for _, name := range stepNames {
			m, ok := r.steps[name]
			if !ok {
				continue
			}
			line := make([]string, 6, 11)
			if first {
				first = false
				line = []string{strconv.FormatInt(r.refs, 10), strconv.FormatInt(r.chunks, 10), strconv.FormatInt(r.packs, 10),
					strconv.Itoa(r.segments), fmt.Sprintf("%.0f", float64(r.bytes)/1e6), fmt.Sprintf("%.1f", r.gen.Seconds())}
			}
			table = append(table, append(line, name, fmt.Sprintf("%.2f", m.wall.Seconds()), fmt.Sprintf("%.2f", m.cpu.Seconds()),
				fmt.Sprintf("%.1f / %.1f", float64(m.minRSS)/(1<<20), float64(m.maxRSS)/(1<<20)), fmt.Sprintf("%.2f", m.otherCPU.Seconds())))
		}
	}
	printTable(table)
	first, last := rows[0], rows[len(rows)-1]
	fmt.Printf("\nFrom %d to %d references (x%.0f):\n", first.refs, last.refs, float64(last.refs)/float64(first.refs))
	for _, name := range stepNames {
		a, ok := first.steps[name]
		if !ok {
			continue
		}
		b := last.steps[name]
		lo, hi := a.maxRSS, a.maxRSS
		for _, r := range rows {
			lo, hi = min(lo, r.steps[name].maxRSS), max(hi, r.steps[name].maxRSS)
		}
		fmt.Printf("  %-19s peak RSS (median) x%.2f (largest/smallest over all sizes x%.2f), time x%.1f\n", name,
			float64(b.maxRSS)/float64(a.maxRSS), float64(hi)/float64(lo), b.wall.Seconds()/a.wall.Seconds())
	}
	fmt.Println("\ngc's own reports:")
	for _, r := range rows {
		fmt.Printf("  %d references: %s\n", r.refs, strings.ReplaceAll(r.gcOut, "\n", "; "))
	}
}
