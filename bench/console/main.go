// Command console benchmarks the web console (issue 16) through Debian's
// Chromium on a catalog at fleet scale: the catalog of bench/server
// (bench/catalogfill: 10,000 VMs, 100,000 backup points, 1,000,000 jobs,
// 100,000 audit records), `coffer server` started on it as a process of
// its own (bench/fleetserver), and a headless Chromium driven through
// the DevTools protocol (chromedp) that signs in on the sign-in page as
// an operator does and then opens the dashboard and every page that
// lists things, -n times each with an emptied and disabled cache (cold)
// and -n times with the cache the previous visits left (warm).
//
// For each page it reports, from the page's own Performance APIs, the
// time from the start of the navigation to
//
//   - TTFB: the first byte of the page's HTML (responseStart): the
//     server's time, with one loopback round trip;
//   - FCP: the first contentful paint (PerformanceObserver, 'paint');
//   - usable: the end of the load event (loadEventEnd), or the first
//     contentful paint when that comes later (a page is not usable
//     before it is seen). By the load event's end the page's style
//     sheets are applied and its deferred scripts (htmx, its SSE
//     extension, coffer.js) have run, so its links, forms and htmx
//     buttons work. domInteractive comes before those scripts ran, when
//     an htmx button does nothing yet, so it is not "usable";
//   - complete: the later of usable and the last htmx swap of a
//     load-triggered fragment (the dashboard's repositories panel);
//
// and, from the DevTools protocol's Network domain, the bytes the page's
// requests transferred (encodedDataLength: headers and bodies as they
// came over the wire) and the number of those that went over the
// network rather than to the cache; and, from /proc, the CPU time the
// server, PostgreSQL (with -db postgres) and the browser used per
// navigation: on a shared machine the wall times include waiting for a
// CPU, these say where the time went. The targets: the dashboard usable
// within 1 s, every list page within 1.5 s; ratio = p95 of usable /
// target (under 1.00 meets it).
//
//	go run ./bench/console                 # the issue's catalog on SQLite, 5 navigations per page and cache
//	go run ./bench/console -scale 100 -n 3 # a quick look on a hundredth of it
//	go run ./bench/console -only 'dashboard|inventory'
//
// The catalog, repository and server state are bench/server's (-work
// defaults to its directory), so a catalog either benchmark filled is
// reused by the other.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/coffer-backup/coffer/bench/benchutil"
	"github.com/coffer-backup/coffer/bench/catalogfill"
	"github.com/coffer-backup/coffer/bench/fleetserver"
	"github.com/coffer-backup/coffer/internal/console"
)

// operator is the user the browser signs in as: the server's
// administrator, whose password the benchmark sets.
const (
	operator = "admin"
	password = "the console benchmark's administrator password"
)

func main() {
	work := flag.String("work", ".cache/bench-server", "directory for the binary, the catalogs and the repository (bench/server's: shared)")
	db := flag.String("db", "sqlite", "catalog: sqlite or postgres")
	scale := flag.Int("scale", 1, "divide the issue's catalog by this (1: the issue's shape)")
	n := flag.Int("n", 5, "measured navigations per page and cache state")
	caches := flag.String("cache", "cold,warm", "cache states to measure: cold (emptied and disabled), warm")
	only := flag.String("only", "", "measure only the pages whose name matches this regular expression")
	profile := flag.String("server-cpu-profile", "", "write the server's CPU profile to this file (coffer --cpu-profile)")
	flag.Parse()
	log.SetFlags(log.Ltime)
	if !console.Built() {
		log.Fatal("the console's front-end files are missing: run scripts/build-ui.sh, then this again")
	}
	modes, err := parseCaches(*caches)
	if err != nil {
		log.Fatal(err)
	}
	var filter *regexp.Regexp
	if *only != "" {
		filter = regexp.MustCompile(*only)
	}
	dir, err := filepath.Abs(*work)
	if err != nil {
		log.Fatal(err)
	}
	coffer := fleetserver.Build(dir)
	shape := catalogfill.IssueShape(time.Time{})
	if *scale > 1 {
		shape = shape.Scaled(*scale)
	}
	in := fleetserver.Prepare(context.Background(), dir, coffer, *db, shape)
	defer in.Close()
	in.InitAdmin()
	pw := filepath.Join(dir, *db, "console-password")
	if err := os.WriteFile(pw, []byte(password), 0o600); err != nil {
		log.Fatal(err)
	}
	in.Run("user", "password", operator, "--new-password-file", pw)

	var args []string
	if *profile != "" {
		args = []string{"--cpu-profile", *profile}
	}
	srv := in.Start(args...)
	defer srv.Stop()
	// The browser's profile is emptied at every start (in the work
	// directory, so that a run stopped by log.Fatal leaves nothing in
	// /tmp): a cold cache is cold.
	userData := filepath.Join(dir, *db, "chromium")
	if err := os.RemoveAll(userData); err != nil {
		log.Fatal(err)
	}
	b := newBrowser(srv.URL, filepath.Join(in.StateDir, "server", "tls.crt"), userData)
	defer b.close()
	b.signIn(operator, password)
	// A catalog whose inventory a refresh emptied (coffer vms without a
	// server lists the connections live, and they list nothing) would
	// make the VM pages light: refuse it.
	recent, outside, unprotected := b.fleet()
	if recent+outside+unprotected != in.Shape.VMs {
		log.Fatalf("the dashboard counts %d VMs, the catalog was filled with %d: its inventory was refreshed since; "+
			"delete %s to fill it again", recent+outside+unprotected, in.Shape.VMs, filepath.Join(dir, in.DB))
	}

	load := benchutil.LoadAverage()
	var results []pageResult
	for _, p := range pages(in.Shape) {
		if filter != nil && !filter.MatchString(p.name) {
			continue
		}
		r := pageResult{page: p, samples: map[cacheMode][]sample{}}
		// One unmeasured visit: the server's first reading of a page
		// (the catalog's pages from disk) is not what an operator
		// clicking around sees, and a warm cache needs a visit.
		if _, err := b.measure(p.path, false, srv.PID(), in.DatabasePID()); err != nil {
			log.Fatal(err)
		}
		for _, m := range modes {
			for range *n {
				s, err := b.measure(p.path, m == cold, srv.PID(), in.DatabasePID())
				if err != nil {
					log.Fatal(err)
				}
				r.samples[m] = append(r.samples[m], s)
			}
			st := r.stats(m)
			log.Printf("%-45s %s: FCP %s, usable %s (p50), %s", p.name, m, ms(st.fcp50), ms(st.usable50), kib(st.bytes))
		}
		results = append(results, r)
	}
	fmt.Printf("\ncatalog (%s): %d VMs, %d backup points, %d jobs (%d policy runs with %d per-VM task rows), %d log lines, %d audit records\n",
		in.DB, in.Shape.VMs, in.Shape.Points(), in.Shape.Jobs, in.Shape.PolicyRuns, in.Shape.TaskRows(), in.Shape.LogLineCount(), in.Shape.Audit)
	fmt.Printf("the dashboard's tiles: %d VMs within their RPO, %d outside it or without a point, %d that no policy selects\n",
		recent, outside, unprotected)
	fmt.Printf("Chromium headless, 1366x900; %d navigations per page and cache state after one unmeasured; load average %s at the start\n", *n, load)
	for _, m := range modes {
		report(os.Stdout, m, results, in.DatabasePID() != 0)
	}
}
