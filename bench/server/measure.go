package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/bench/catalogfill"
	"github.com/coffer-backup/coffer/bench/fleetserver"
	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/job"
)

// endpoint is one request the benchmark repeats; path may vary per
// request (a random job of the history).
type endpoint struct {
	name string
	path func(r *rand.Rand) string
}

func fixed(p string) func(*rand.Rand) string { return func(*rand.Rand) string { return p } }

// endpoints are the status and list endpoints, on the shape's rows.
func endpoints(s catalogfill.Shape) []endpoint {
	randomJob := func(r *rand.Rand) int64 {
		for {
			if id := 1 + r.Int64N(int64(s.Jobs)); !s.IsPolicyRun(id) {
				return id
			}
		}
	}
	randomRun := func(r *rand.Rand) int64 { return s.PolicyRun(r.IntN(s.PolicyRuns)) }
	randomVM := func(r *rand.Rand) string { return catalogfill.VMName(r.IntN(s.VMs)) }
	return []endpoint{
		{"healthz", fixed("/healthz")},
		{"readyz", fixed("/readyz")},
		{"jobs: first page (default size)", fixed("/api/v1/jobs")},
		{"jobs: newest 50", fixed("/api/v1/jobs?limit=50")},
		{"jobs: 50, deep (cursor)", func(r *rand.Rand) string {
			return fmt.Sprintf("/api/v1/jobs?limit=50&after=%d", 1+r.Int64N(int64(s.Jobs)))
		}},
		{"jobs: failed, 50", fixed("/api/v1/jobs?status=failed&limit=50")},
		{"jobs: kind restore, 50", fixed("/api/v1/jobs?kind=restore&limit=50")},
		{"jobs: user, 50", fixed("/api/v1/jobs?user=alice&limit=50")},
		{"jobs: policy, 50", fixed("/api/v1/jobs?policy=" + catalogfill.Policy + "&limit=50")},
		{"jobs: a VM's, 50", func(r *rand.Rand) string { return "/api/v1/jobs?limit=50&vm=" + randomVM(r) }},
		{"job detail: single-VM job", func(r *rand.Rand) string { return fmt.Sprintf("/api/v1/jobs/%d", randomJob(r)) }},
		{"job detail: policy run", func(r *rand.Rand) string { return fmt.Sprintf("/api/v1/jobs/%d", randomRun(r)) }},
		{"job log: first page", func(r *rand.Rand) string { return fmt.Sprintf("/api/v1/jobs/%d/log", randomRun(r)) }},
		{"job log: page deep in a run", func(r *rand.Rand) string {
			return fmt.Sprintf("/api/v1/jobs/%d/log?start=%d&limit=100", randomRun(r), r.IntN(s.VMs))
		}},
		{"vms: first page (default size)", fixed("/api/v1/vms")},
		{"vms: 100, deep (cursor)", func(r *rand.Rand) string { return "/api/v1/vms?after=" + vmCursor(s.VM(r.IntN(s.VMs))) }},
		{"vms: unprotected, 100", fixed("/api/v1/vms?protection=unprotected")},
		{"vms: a connection's, 100", func(r *rand.Rand) string {
			return "/api/v1/vms?connection=" + catalogfill.Connection(r.IntN(s.Connections))
		}},
		{"vms: name search", func(r *rand.Rand) string { return "/api/v1/vms?name=" + catalogfill.VMName(r.IntN(s.VMs))[3:] }},
		{"vms: 1000 (largest page)", fixed("/api/v1/vms?limit=1000")},
		{"points: catalog, first page", fixed("/api/v1/points")},
		{"points: catalog, 50, deep (cursor)", func(r *rand.Rand) string {
			p := s.Point(r.IntN(s.VMs), r.IntN(s.PointsPerVM))
			return fmt.Sprintf("/api/v1/points?limit=50&after=%d.%s.%s", p.Time.UnixMicro(), p.Repository, p.ID)
		}},
		{"points: catalog, a VM's", func(r *rand.Rand) string { return "/api/v1/points?vm=" + randomVM(r) }},
		// The console's repository page: 50 points of one repository (the
		// fill's 100,000 are all in one), the newest and after a cursor.
		{"points: a repository's 50", fixed("/api/v1/points?limit=50&repository=" + s.Repository)},
		{"points: a repository's 50, deep (cursor)", func(r *rand.Rand) string {
			p := s.Point(r.IntN(s.VMs), r.IntN(s.PointsPerVM))
			return fmt.Sprintf("/api/v1/points?limit=50&repository=%s&after=%d.%s.%s", s.Repository, p.Time.UnixMicro(), p.Repository, p.ID)
		}},
		{"points: repository (small, real)", fixed("/api/v1/repositories/" + s.RepositoryName + "/points")},
		{"audit: newest page", fixed("/api/v1/audit")},
		{"audit: a user's, 50", fixed("/api/v1/audit?user=alice&limit=50")},
		{"audit: an object's, 50", fixed("/api/v1/audit?object=/repositories/" + s.RepositoryName + "&limit=50")},
		{"metrics", fixed("/metrics")},
	}
}

// result is one endpoint's latencies.
type result struct {
	name          string
	status        int // the last answer's status
	bytes         int // the last answer's size
	p50, p95, p99 time.Duration
	skipped       string
}

// measure sends n requests to e one after another (after a few unmeasured
// ones that open connections and warm caches) and returns the quantiles.
func measure(s *fleetserver.Server, token string, e endpoint, n int, r *rand.Rand) result {
	res := result{name: e.name}
	get := func() (time.Duration, int, int) {
		req, err := http.NewRequest(http.MethodGet, s.URL+e.path(r), nil)
		if err != nil {
			log.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		resp, err := fleetserver.Client.Do(req)
		if err != nil {
			log.Fatalf("%s: %v", e.name, err)
		}
		size, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			log.Fatalf("%s: %v", e.name, err)
		}
		return time.Since(start), resp.StatusCode, int(size)
	}
	for range 3 {
		if _, status, _ := get(); status == http.StatusNotFound && e.name == "metrics" {
			res.skipped = "not served by this build"
			return res
		}
	}
	times := make([]time.Duration, n)
	for i := range times {
		times[i], res.status, res.bytes = get()
		if res.status != http.StatusOK {
			log.Printf("%s: answered %d", e.name, res.status)
		}
	}
	res.p50, res.p95, res.p99 = fleetserver.Quantile(times, 0.50), fleetserver.Quantile(times, 0.95), fleetserver.Quantile(times, 0.99)
	return res
}

// waitForHealthCheck scrapes /metrics until it holds the health
// monitor's gauges of the catalog (a VM's last good backup), and returns
// how long after ready that was.
func waitForHealthCheck(s *fleetserver.Server, token string) time.Duration {
	for {
		req, err := http.NewRequest(http.MethodGet, s.URL+"/metrics", nil)
		if err != nil {
			log.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := fleetserver.Client.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			log.Fatal(err)
		}
		if resp.StatusCode == http.StatusNotFound {
			return 0 // a build without /metrics
		}
		if strings.Contains(string(b), "\ncoffer_backup_last_success_timestamp_seconds{") {
			return time.Since(s.Started) - s.Ready
		}
		if time.Since(s.Started) > 10*time.Minute {
			log.Fatalf("the health monitor's gauges are not in /metrics 10 minutes after start:\n%s", s.Log())
		}
		time.Sleep(100 * time.Millisecond) // the poll's interval, not synchronisation
	}
}

// sseDelays records n log lines of a task, as the engine does, in this
// process (another process than the server, sharing its catalog), and
// measures for each the time from the call that records it until the
// server's event stream of the task delivers it. Lines are recorded at
// random moments up to pollEvery apart, so that a server that polls the
// catalog is caught at every point of its cycle.
func sseDelays(ctx context.Context, s *fleetserver.Server, token, catalogLoc string, n int, r *rand.Rand) []time.Duration {
	cat, err := catalogopen.Open(ctx, catalogLoc)
	if err != nil {
		log.Fatal(err)
	}
	defer cat.Close()
	m, err := job.New(ctx, cat, job.Options{PruneEvery: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	h, err := m.Start(ctx, job.Spec{Kind: job.KindVerify, User: "admin", Object: "/repositories/default"})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _, _ = h.Finish(ctx, "success", "") }()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/api/v1/jobs/%d/events", s.URL, h.ID()), nil)
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := fleetserver.Client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		log.Fatalf("event stream: %d %s", resp.StatusCode, b)
	}
	samples := make(chan int, 16) // the "i" field of each sample line the stream brings
	go func() {
		defer close(samples)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev api.JobEvent
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				log.Fatalf("event stream: %v: %s", err, data)
			}
			if ev.Type == "log" && ev.Line != nil && ev.Line.Message == "sample" {
				i, _ := ev.Line.Fields["i"].(float64)
				samples <- int(i)
			}
		}
	}()
	delays := make([]time.Duration, n)
	for i := range delays {
		time.Sleep(time.Duration(r.Int64N(int64(pollEvery)))) // a random phase of the server's poll
		t0 := time.Now()
		h.Log("info", "sample", map[string]any{"i": i})
		for {
			got, ok := <-samples
			if !ok {
				log.Fatalf("the event stream ended after %d samples", i)
			}
			if got == i {
				break
			}
		}
		delays[i] = time.Since(t0)
	}
	return delays
}

// vmCursor is the cursor /vms answers as Coffer-Next after v: its
// position (connection, name, ID) as JSON, base64url.
func vmCursor(v catalog.VMRecord) string {
	b, err := json.Marshal([]string{v.Connection, v.Name, v.ID})
	if err != nil {
		log.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// pollEvery is how often a server on SQLite reads the catalog for other
// processes' lines (job.Options' default).
const pollEvery = 250 * time.Millisecond
