// Command catalogexport benchmarks `coffer catalog export
// --to-repository` and `coffer catalog import --from-repository` on a
// catalog at fleet scale (issue 39: "Exporting a 10,000-VM catalog takes
// under 30 s and under 100 MiB RSS"). The catalog, on SQLite and on
// PostgreSQL, is issue 15's fleet as bench/catalogfill writes it (10,000
// VMs, 1,000,000 jobs with 1,000,000 per-VM task rows and ~3,000,000 log
// lines, 100,000 audit records) with 30 backup points per VM, and the
// server's own state beside it (state.go: users, tokens, ACLs,
// configuration objects, notifications, the media inventory, schedule
// slots, usage samples).
//
// For each catalog, the built binary runs as a process of its own:
//
//   - the export of the server's state (the default), then with
//     --history (the jobs, tasks and logs too: most of the rows): wall
//     time, peak RSS (VmHWM, read while it runs) and CPU time (wait4's
//     rusage) of the coffer process;
//
//   - the import of each export on a fresh host (an empty catalog of the
//     same kind), measured the same way; then every exported table of
//     the fresh catalog is compared with the source's, row by row (a
//     hash of each table's rows in order; records the import itself
//     audits come after the exported ones and are left out).
//
// On PostgreSQL the database server's own memory and CPU are not the
// coffer process's, and are not counted.
//
//	go run ./bench/catalogexport                       # both catalogs, the issue's shape
//	go run ./bench/catalogexport -db sqlite -scale 100 # a quick look
//
// Filled catalogs are kept in -work and reused by the next run.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coffer-backup/coffer/bench/catalogfill"
	"github.com/coffer-backup/coffer/bench/fleetserver"
	"github.com/coffer-backup/coffer/internal/api"
)

// Targets of issue 39.
const (
	wallTarget = 30 * time.Second
	rssTarget  = 100 << 20
)

// result is one export and the import of it on a fresh host.
type result struct {
	db      string
	export  api.CatalogExport
	exp     usage
	imp     usage
	checked string // what the comparison of the fresh host's tables found
}

func main() {
	work := flag.String("work", ".cache/bench-catalogexport", "directory for the binary, the catalogs and the repository (kept between runs)")
	dbs := flag.String("db", "sqlite,postgres", "catalogs to measure")
	scale := flag.Int("scale", 1, "divide the issue's catalog by this (1: the issue's shape)")
	points := flag.Int("points", 30, "backup points per VM")
	profile := flag.String("cpu-profile", "", "write the CPU profile of each export and import to this directory (coffer --cpu-profile)")
	flag.Parse()
	ctx := context.Background()
	log.SetFlags(log.Ltime)

	dir, err := filepath.Abs(*work)
	if err != nil {
		log.Fatal(err)
	}
	coffer := fleetserver.Build(dir)
	shape := catalogfill.IssueShape(time.Time{})
	shape.PointsPerVM = *points
	state := fleetState
	if *scale > 1 {
		shape = shape.Scaled(*scale)
		state = state.scaled(*scale)
	}
	var results []result
	for _, db := range strings.Split(*dbs, ",") {
		in := fleetserver.Prepare(ctx, dir, coffer, db, shape)
		addState(ctx, in.Catalog, in.Shape, state)
		for _, history := range []bool{false, true} {
			results = append(results, exportAndImport(ctx, in, history, *profile))
		}
		in.Close()
	}
	report(results, shape, state)
}

func (st stateShape) scaled(div int) stateShape {
	d := func(n int) int { return max(1, n/div) }
	st.Users, st.Policies, st.Notifications, st.Volumes = d(st.Users), d(st.Policies), d(st.Notifications), d(st.Volumes)
	return st
}

// exportAndImport exports the installation's catalog into its
// repository, imports that export on a fresh host and compares the
// fresh host's tables with the source's.
func exportAndImport(ctx context.Context, in *fleetserver.Install, history bool, profile string) result {
	r := result{db: in.DB}
	what := "state"
	args := []string{"catalog", "export", "--to-repository", "--json"}
	if history {
		what = "state and history"
		args = append(args, "--history")
	}
	if profile != "" {
		if err := os.MkdirAll(profile, 0o755); err != nil {
			log.Fatal(err)
		}
		name := fmt.Sprintf("export-%s-history=%v.pprof", in.DB, history)
		args = append(args, "--cpu-profile", filepath.Join(profile, name))
	}
	var res api.CatalogExportResult
	r.exp = runMeasured(in.Coffer, in.Env, &res, args...)
	r.export = res.Export
	log.Printf("%s: export of the %s: %d rows in %d parts (%.1f MiB) in %.1f s, peak RSS %.1f MiB (anonymous %.1f, file %.1f), CPU %.1f s",
		in.DB, what, r.export.Rows, r.export.Parts, mib(r.export.StoredBytes), r.exp.wall.Seconds(), mib(r.exp.peakRSS),
		mib(r.exp.peakAnon), mib(r.exp.peakFile), r.exp.cpu.Seconds())

	fresh := newHost(ctx, in)
	var imp api.CatalogImport
	impArgs := []string{"catalog", "import", "--from-repository", "--export", r.export.ID, "--json"}
	if profile != "" {
		impArgs = append(impArgs, "--cpu-profile", filepath.Join(profile, fmt.Sprintf("import-%s-history=%v.pprof", in.DB, history)))
	}
	r.imp = runMeasured(in.Coffer, fresh.env, &imp, impArgs...)
	log.Printf("%s: import on a fresh host in %.1f s, peak RSS %.1f MiB (anonymous %.1f), CPU %.1f s", in.DB, r.imp.wall.Seconds(),
		mib(r.imp.peakRSS), mib(r.imp.peakAnon), r.imp.cpu.Seconds())
	r.checked = compareTables(ctx, in.Catalog, fresh.catalog, r.export)
	log.Printf("%s: the fresh host's tables: %s", in.DB, r.checked)
	fresh.close()
	return r
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// report prints each export and import, with the ratio of each figure to
// the issue's target (below 1: met).
func report(results []result, s catalogfill.Shape, st stateShape) {
	fmt.Printf("\ncatalog: %d VMs, %d backup points, %d jobs (%d per-VM task rows), %d log lines, %d audit records;\n",
		s.VMs, s.Points(), s.Jobs, s.TaskRows(), s.LogLineCount(), s.Audit)
	fmt.Printf("state: %d users (%d tokens, %d ACL entries), %d configuration objects, %d notifications, %d tapes (%d segments)\n",
		st.Users, st.Users*st.TokensPerUser, st.Users*st.ACLPerUser, st.Policies, st.Notifications, st.Volumes,
		st.Volumes*st.SegmentsPerVolume)
	fmt.Printf("targets: export under %s and %d MiB peak RSS (ratio below 1.00 meets it)\n\n", wallTarget, rssTarget>>20)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "catalog\texport\trows\tparts\tstored MiB\twall s\tratio\tpeak RSS MiB\tratio\tanon MiB\tfile MiB\tCPU s\t"+
		"import wall s\timport RSS MiB\timport anon MiB\timport CPU s\t")
	for _, r := range results {
		what := "state"
		if r.export.History {
			what = "+history"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%.1f\t%.1f\t%.2f\t%.1f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", r.db, what,
			r.export.Rows, r.export.Parts, mib(r.export.StoredBytes), r.exp.wall.Seconds(), r.exp.wall.Seconds()/wallTarget.Seconds(),
			mib(r.exp.peakRSS), mib(r.exp.peakRSS)/mib(rssTarget), mib(r.exp.peakAnon), mib(r.exp.peakFile), r.exp.cpu.Seconds(),
			r.imp.wall.Seconds(), mib(r.imp.peakRSS), mib(r.imp.peakAnon), r.imp.cpu.Seconds())
	}
	_ = w.Flush()
	fmt.Println()
	for _, r := range results {
		fmt.Printf("%s, export %s (history %v): fresh host %s\n", r.db, r.export.ID, r.export.History, r.checked)
	}
}
