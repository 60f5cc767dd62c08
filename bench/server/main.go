// Command server benchmarks `coffer server` on a catalog at fleet scale
// (issue 15): the built binary runs as a process of its own on a SQLite
// and on a PostgreSQL catalog filled by bench/catalogfill (10,000 VMs,
// 100,000 backup points, 1,000,000 jobs with 1,000,000 per-VM task rows
// and ~3,000,000 log lines, 100,000 audit records), with an
// administrator's API token, and the benchmark measures:
//
//   - p50/p95/p99 of every status and list endpoint over -requests
//     requests each, one after another on a kept-alive connection
//     (target: p95 under 100 ms);
//
//   - the delay of a task's log line from the call that records it, in
//     this process (sharing the catalog, as an engine on another host
//     does), to the server's event stream of the task (target: under 1 s);
//
//   - the time from exec to the first /readyz answering 200, over -starts
//     starts (target: under 1 s);
//
//   - the server's peak RSS (VmHWM) after all of it.
//
// The endpoints are measured once the server's health monitor has read
// the catalog for the first time (its gauges are in /metrics): that first
// check runs at start, and a scrape before it would serve no VM's series.
// The time from ready to that point is reported.
//
//	go run ./bench/server                       # both catalogs, the issue's shape
//	go run ./bench/server -db sqlite -scale 100 # a quick look: a hundredth of it
//
// Filled catalogs are kept in -work with their shape and reused by the
// next run (filling the issue's shape takes minutes); the repository the
// server opens is a small real one (two backups of an 8 MiB image),
// because no endpoint measured here reads a repository's contents but
// its points listing and readiness.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coffer-backup/coffer/bench/catalogfill"
	"github.com/coffer-backup/coffer/bench/fleetserver"
)

// Targets of issue 15.
const (
	endpointTarget = 100 * time.Millisecond
	sseTarget      = time.Second
	readyTarget    = time.Second
)

type dbRun struct {
	db        string
	endpoints []result
	sse       []time.Duration
	ready     []time.Duration
	// firstCheck is the time from ready to the health monitor's first
	// gauges of the catalog in /metrics.
	firstCheck time.Duration
	peakRSS    int64
}

func main() {
	work := flag.String("work", ".cache/bench-server", "directory for the binary, the catalogs and the repository (kept between runs)")
	dbs := flag.String("db", "sqlite,postgres", "catalogs to measure")
	scale := flag.Int("scale", 1, "divide the issue's catalog by this (1: the issue's shape)")
	requests := flag.Int("requests", 200, "requests per endpoint")
	sse := flag.Int("sse", 100, "log lines whose delay to the event stream is measured")
	starts := flag.Int("starts", 5, "server starts timed until ready")
	only := flag.String("only", "", "measure only the endpoints whose name matches this regular expression")
	profile := flag.String("server-cpu-profile", "", "write the CPU profile of the server measured (the last start) to this file (coffer --cpu-profile)")
	flag.Parse()
	ctx := context.Background()
	log.SetFlags(log.Ltime)

	dir, err := filepath.Abs(*work)
	if err != nil {
		log.Fatal(err)
	}
	coffer := fleetserver.Build(dir)
	shape := catalogfill.IssueShape(time.Time{})
	if *scale > 1 {
		shape = shape.Scaled(*scale)
	}
	var filter *regexp.Regexp
	if *only != "" {
		filter = regexp.MustCompile(*only)
	}
	var runs []dbRun
	for _, db := range strings.Split(*dbs, ",") {
		in := fleetserver.Prepare(ctx, dir, coffer, db, shape)
		runs = append(runs, measureServer(ctx, in, filter, *requests, *sse, *starts, profileOf(*profile, db, *dbs)))
		in.Close()
	}
	report(runs, shape, *requests)
}

// profileOf is the CPU profile file of one catalog's server: the flag's
// file, with the catalog's name before its extension when several are
// measured ("" when none is asked for).
func profileOf(file, db, dbs string) string {
	if file == "" || !strings.Contains(dbs, ",") {
		return file
	}
	ext := filepath.Ext(file)
	return strings.TrimSuffix(file, ext) + "-" + db + ext
}

func measureServer(ctx context.Context, in *fleetserver.Install, filter *regexp.Regexp, requests, sseSamples, starts int, profile string) dbRun {
	db, s := in.DB, in.Shape
	r := dbRun{db: db}
	in.InitAdmin()
	token := strings.TrimSpace(in.Run("token", "create", "--user", "admin", "--grant", "/=Admin", "--lifetime", "1d"))
	for i := range starts {
		var args []string
		if profile != "" && i == starts-1 {
			args = []string{"--cpu-profile", profile}
		}
		srv := in.Start(args...)
		r.ready = append(r.ready, srv.Ready)
		log.Printf("%s: start %d ready in %s", db, i+1, ms(srv.Ready))
		if i < starts-1 {
			srv.Stop()
			continue
		}
		if s.Points() > 0 {
			r.firstCheck = waitForHealthCheck(srv, token)
			log.Printf("%s: the health monitor's first check was in /metrics %s after ready", db, ms(r.firstCheck))
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for _, e := range endpoints(s) {
			if filter != nil && !filter.MatchString(e.name) {
				continue
			}
			res := measure(srv, token, e, requests, rng)
			log.Printf("%s: %-34s p50 %8s  p95 %8s  p99 %8s  %d, %d bytes %s", db, e.name, ms(res.p50), ms(res.p95), ms(res.p99),
				res.status, res.bytes, res.skipped)
			r.endpoints = append(r.endpoints, res)
		}
		if sseSamples > 0 {
			r.sse = sseDelays(ctx, srv, token, in.Catalog, sseSamples, rng)
			log.Printf("%s: SSE p50 %s p95 %s max %s", db, ms(fleetserver.Quantile(r.sse, 0.5)), ms(fleetserver.Quantile(r.sse, 0.95)), ms(slices.Max(r.sse)))
		}
		r.peakRSS = srv.PeakRSS()
		srv.Stop()
	}
	return r
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// report prints the endpoints' table (a column group per catalog) and the
// other figures, each with its ratio to the target (below 1: met).
func report(runs []dbRun, s catalogfill.Shape, requests int) {
	fmt.Printf("\ncatalog: %d VMs, %d backup points, %d jobs (%d policy runs with %d per-VM task rows), %d log lines, %d audit records\n",
		s.VMs, s.Points(), s.Jobs, s.PolicyRuns, s.TaskRows(), s.LogLineCount(), s.Audit)
	fmt.Printf("%d requests per endpoint, one at a time; ratio = p95 / %s target (under 1.00 meets it)\n\n", requests, ms(endpointTarget))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "endpoint\t"
	for _, r := range runs {
		head += fmt.Sprintf("%s p50\tp95\tp99\tratio\t", r.db)
	}
	fmt.Fprintln(w, head)
	if len(runs) > 0 {
		for i, e := range runs[0].endpoints {
			line := e.name + "\t"
			for _, r := range runs {
				x := r.endpoints[i]
				if x.skipped != "" {
					line += "-\t-\t-\tn/a\t"
					continue
				}
				line += fmt.Sprintf("%s\t%s\t%s\t%.2f\t", ms(x.p50), ms(x.p95), ms(x.p99), float64(x.p95)/float64(endpointTarget))
			}
			fmt.Fprintln(w, line)
		}
	}
	w.Flush()
	for _, e := range runs[0].endpoints {
		if e.skipped != "" {
			fmt.Printf("n/a: %s: %s\n", e.name, e.skipped)
		}
	}
	fmt.Println()
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "\tcatalog\tp50\tp95\tmax\ttarget\tratio (max / target)\t")
	for _, r := range runs {
		if len(r.sse) > 0 {
			fmt.Fprintf(w, "SSE delay (%d lines)\t%s\t%s\t%s\t%s\t%s\t%.2f\t\n", len(r.sse), r.db, ms(fleetserver.Quantile(r.sse, 0.5)),
				ms(fleetserver.Quantile(r.sse, 0.95)), ms(slices.Max(r.sse)), ms(sseTarget), float64(slices.Max(r.sse))/float64(sseTarget))
		}
		fmt.Fprintf(w, "exec to /readyz 200 (%d starts)\t%s\t%s\t%s\t%s\t%s\t%.2f\t\n", len(r.ready), r.db, ms(fleetserver.Quantile(r.ready, 0.5)),
			ms(fleetserver.Quantile(r.ready, 0.95)), ms(slices.Max(r.ready)), ms(readyTarget), float64(slices.Max(r.ready))/float64(readyTarget))
	}
	w.Flush()
	fmt.Println()
	for _, r := range runs {
		if r.firstCheck > 0 {
			fmt.Printf("health monitor's first check in /metrics, after ready, on %s: %s\n", r.db, ms(r.firstCheck))
		}
	}
	fmt.Println()
	for _, r := range runs {
		fmt.Printf("peak RSS (VmHWM) of coffer server on %s: %.0f MiB\n", r.db, float64(r.peakRSS)/(1<<20))
	}
}
