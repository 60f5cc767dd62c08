package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coffer-backup/coffer/bench/fleetserver"
)

// cacheMode is the state of the browser's cache at a navigation.
type cacheMode string

const (
	cold cacheMode = "cold" // emptied and disabled: every file over the network
	warm cacheMode = "warm" // what the previous visits left (static files kept an hour)
)

var cacheHelp = map[cacheMode]string{
	cold: "cold cache (emptied and disabled before each navigation: every file comes over the network)",
	warm: "warm cache (what the previous visits of the page left: the static files are cached for an hour)",
}

// parseCaches reads -cache: cold, warm or both, comma-separated.
func parseCaches(s string) ([]cacheMode, error) {
	var out []cacheMode
	for _, f := range strings.Split(s, ",") {
		m := cacheMode(strings.TrimSpace(f))
		if m != cold && m != warm {
			return nil, fmt.Errorf("-cache: %q is neither cold nor warm (say cold, warm or cold,warm)", f)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

// pageResult is a page's samples per cache state.
type pageResult struct {
	page    consolePage
	samples map[cacheMode][]sample
}

// pageStats are a page's figures in one cache state: medians, p95s
// (nearest rank: of 5 samples, the slowest) and the median of the bytes.
type pageStats struct {
	ttfb50, fcp50, fcp95, usable50, usable95, complete50 time.Duration
	serverCPU50, databaseCPU50, browserCPU50             time.Duration
	bytes                                                int64
	requests                                             int
	ratio                                                float64 // usable95 / the page's target
}

func (r pageResult) stats(m cacheMode) pageStats {
	ss := r.samples[m]
	pick := func(f func(sample) time.Duration) []time.Duration {
		out := make([]time.Duration, len(ss))
		for i, s := range ss {
			out[i] = f(s)
		}
		return out
	}
	ttfb := pick(func(s sample) time.Duration { return s.ttfb })
	fcp := pick(func(s sample) time.Duration { return s.fcp })
	usable := pick(func(s sample) time.Duration { return s.usable })
	complete := pick(func(s sample) time.Duration { return s.complete })
	bytes := pick(func(s sample) time.Duration { return time.Duration(s.bytes) })
	reqs := pick(func(s sample) time.Duration { return time.Duration(s.requests) })
	serverCPU := pick(func(s sample) time.Duration { return s.serverCPU })
	databaseCPU := pick(func(s sample) time.Duration { return s.databaseCPU })
	browserCPU := pick(func(s sample) time.Duration { return s.browserCPU })
	st := pageStats{ttfb50: q(ttfb, 0.5), fcp50: q(fcp, 0.5), fcp95: q(fcp, 0.95), usable50: q(usable, 0.5),
		usable95: q(usable, 0.95), complete50: q(complete, 0.5), bytes: int64(q(bytes, 0.5)), requests: int(q(reqs, 0.5)),
		serverCPU50: q(serverCPU, 0.5), databaseCPU50: q(databaseCPU, 0.5), browserCPU50: q(browserCPU, 0.5)}
	st.ratio = float64(st.usable95) / float64(r.page.target)
	return st
}

func q(d []time.Duration, p float64) time.Duration { return fleetserver.Quantile(d, p) }

// report prints one table: every page's figures in cache state m, with
// PostgreSQL's CPU time when database says it runs beside the server.
func report(out io.Writer, m cacheMode, results []pageResult, database bool) {
	who := "the server"
	if database {
		who = "the server, PostgreSQL"
	}
	fmt.Fprintf(out, "\n%s; CPU: medians of the CPU time %s and the browser used per navigation; "+
		"ratio = usable p95 / target (under 1.00 meets it)\n\n", cacheHelp[m], who)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	db, dbHead := func(pageStats) string { return "" }, ""
	if database {
		db, dbHead = func(st pageStats) string { return ms(st.databaseCPU50) + "\t" }, "PostgreSQL\t"
	}
	fmt.Fprintln(w, "page\ttarget\tTTFB p50\tFCP p50\tFCP p95\tusable p50\tusable p95\tcomplete p50\ttransferred\trequests\tCPU server\t"+
		dbHead+"browser\tratio\t")
	for _, r := range results {
		st := r.stats(m)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s%s\t%.2f\t\n", r.page.name, ms(r.page.target), ms(st.ttfb50),
			ms(st.fcp50), ms(st.fcp95), ms(st.usable50), ms(st.usable95), ms(st.complete50), kib(st.bytes), st.requests,
			ms(st.serverCPU50), db(st), ms(st.browserCPU50), st.ratio)
	}
	w.Flush()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000) }

func kib(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }
