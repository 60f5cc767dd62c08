package main

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium of Debian's (never a downloaded one)
// with one tab, trusting the benchmark server's certificate only, and
// the requests of the page it shows, as the DevTools protocol's Network
// domain reports them.
type browser struct {
	ctx    context.Context
	cancel func()
	base   string // the server's URL

	mu       sync.Mutex
	requests map[network.RequestID]*request
}

type request struct {
	kind     network.ResourceType
	finished bool
	failed   bool
	// bytes is what came over the wire for it (encodedDataLength:
	// headers and body as received, before decompression).
	bytes float64
}

// probe runs in every document before the page's own scripts (through
// the DevTools protocol, so the console's Content-Security-Policy stays
// as it is): it keeps the first contentful paint the PerformanceObserver
// reports, and when the last htmx swap of the page settled (the
// dashboard loads its repositories' panel after the page).
const probe = `window.__bench = {fcp: -1, settled: 0};
new PerformanceObserver(list => {
	for (const e of list.getEntries()) if (e.name === 'first-contentful-paint') window.__bench.fcp = e.startTime;
}).observe({type: 'paint', buffered: true});
document.addEventListener('htmx:afterSettle', () => { window.__bench.settled = performance.now(); });`

// loaded is true once the page fired its load event, painted its first
// content, and no htmx element waits for its load-triggered request.
const loaded = `(() => {
	const n = performance.getEntriesByType('navigation')[0];
	return !!n && n.loadEventEnd > 0 && !!window.__bench && window.__bench.fcp >= 0 && !document.querySelector('[hx-trigger="load"]');
})()`

// timings are the page's own figures, in milliseconds from the start
// of its navigation (Navigation Timing Level 2, Paint Timing).
const timings = `(() => {
	const n = performance.getEntriesByType('navigation')[0];
	return {status: n.responseStatus, ttfb: n.responseStart, loadEnd: n.loadEventEnd,
		fcp: window.__bench.fcp, settled: window.__bench.settled, path: location.pathname, signedIn: !!document.querySelector('#who')};
})()`

type pageTimings struct {
	Status   int     `json:"status"`
	TTFB     float64 `json:"ttfb"`
	LoadEnd  float64 `json:"loadEnd"`
	FCP      float64 `json:"fcp"`
	Settled  float64 `json:"settled"`
	Path     string  `json:"path"`
	SignedIn bool    `json:"signedIn"`
}

func newBrowser(base, tlsCert, profile string) *browser {
	exe, err := exec.LookPath("chromium")
	if err != nil {
		log.Fatal("chromium is not installed: apt-get install chromium (the benchmark never downloads a browser)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(profile),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1366, 900),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", spki(tlsCert)),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{ctx: ctx, cancel: func() { cancel(); cancelAlloc() }, base: base, requests: map[network.RequestID]*request{}}
	if err := chromedp.Run(ctx); err != nil {
		log.Fatalf("starting %s: %v", exe, err)
	}
	chromedp.ListenTarget(ctx, b.observe)
	b.run(network.Enable(), chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(probe).Do(ctx)
		return err
	}))
	return b
}

func (b *browser) close() { b.cancel() }

// observe keeps the requests of the page shown (see measure).
func (b *browser) observe(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		if _, ok := b.requests[e.RequestID]; !ok { // a redirect keeps its ID
			b.requests[e.RequestID] = &request{kind: e.Type}
		}
	case *network.EventLoadingFinished:
		if r := b.requests[e.RequestID]; r != nil {
			r.finished, r.bytes = true, e.EncodedDataLength
		}
	case *network.EventLoadingFailed:
		if r := b.requests[e.RequestID]; r != nil {
			r.finished, r.failed = true, true
		}
	}
}

// idle reports whether every request of the page but its event streams
// (which stay open) has finished.
func (b *browser) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.requests {
		if !r.finished && r.kind != network.ResourceTypeEventSource {
			return false
		}
	}
	return true
}

// run runs browser actions, bounded in time so that a hang stops the
// benchmark rather than the machine's night.
func (b *browser) run(actions ...chromedp.Action) {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var loc, body string
		_ = chromedp.Run(b.ctx, chromedp.Location(&loc), chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &body))
		log.Fatalf("browser: %v\nat %s:\n%.2000s", err, loc, body)
	}
}

// signIn signs in through the console's sign-in page, as the console's
// tests do.
func (b *browser) signIn(user, password string) {
	b.run(chromedp.Navigate(b.base+"/ui/login"),
		chromedp.SendKeys("#user", user), chromedp.SendKeys("#password", password), chromedp.Click("#signin"),
		chromedp.WaitVisible("#who"))
}

// pid is the browser's process ID (its other processes are below it).
func (b *browser) pid() int { return chromedp.FromContext(b.ctx).Browser.Process().Pid }

// fleet reads the dashboard's tiles: VMs within their RPO, outside it
// (or without a point) and unprotected.
func (b *browser) fleet() (recent, outside, unprotected int) {
	var tiles []string
	b.run(chromedp.Navigate(b.base+"/ui/"), chromedp.WaitVisible("#vms-unprotected"),
		chromedp.Evaluate(`["#vms-recent", "#vms-stale", "#vms-unprotected"].map(s => document.querySelector(s).innerText)`, &tiles))
	n := make([]int, len(tiles))
	for i, t := range tiles {
		if _, err := fmt.Sscan(t, &n[i]); err != nil {
			log.Fatalf("the dashboard's tile %d reads %q, not a number", i, t)
		}
	}
	return n[0], n[1], n[2]
}

// sample is one navigation's figures.
type sample struct {
	ttfb, fcp, usable, complete time.Duration
	// CPU time the server, PostgreSQL (its postmaster and backends; 0
	// on SQLite, which is in the server) and the browser (all its
	// processes) used from the blank tab to the page's end: where the
	// time went.
	serverCPU, databaseCPU, browserCPU time.Duration
	bytes                              int64 // transferred, all of the page's requests
	requests                           int   // those that went over the network
}

// measure opens path from a blank tab and returns its figures once the
// page is loaded and its requests are done. cold: the browser's cache is
// emptied and disabled first, so every file of the page comes over the
// network; otherwise the cache holds what the previous visits left.
// server and database are the process IDs of the server and of
// PostgreSQL's postmaster (0: none).
func (b *browser) measure(path string, cold bool, server, database int) (sample, error) {
	b.run(chromedp.Navigate("about:blank"), network.SetCacheDisabled(cold))
	if cold {
		b.run(network.ClearBrowserCache())
	}
	server0, database0, browser0 := cpuTime(server, false), cpuTime(database, true), cpuTime(b.pid(), true)
	b.mu.Lock()
	b.requests = map[network.RequestID]*request{}
	b.mu.Unlock()
	b.run(chromedp.Navigate(b.base + path))
	// Polled every 5 ms, in Go rather than with chromedp.Poll: an
	// evaluation can meet the execution context of the document before
	// (-32000, "Cannot find context"), and is then asked again.
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var ok bool
		err := chromedp.Run(b.ctx, chromedp.Evaluate(loaded, &ok))
		if err == nil && ok && b.idle() { // idle: the load-triggered requests too
			break
		}
		if err != nil && !strings.Contains(err.Error(), "Cannot find context") {
			return sample{}, fmt.Errorf("%s: %w", path, err)
		}
		if time.Now().After(deadline) {
			return sample{}, fmt.Errorf("%s: not loaded, or requests still running, 90 s after the navigation", path)
		}
	}
	var t pageTimings
	serverCPU, databaseCPU, browserCPU := cpuTime(server, false)-server0, cpuTime(database, true)-database0, cpuTime(b.pid(), true)-browser0
	b.run(chromedp.Evaluate(timings, &t))
	if t.Status != 200 || !t.SignedIn || t.Path == "/ui/login" {
		return sample{}, fmt.Errorf("%s answered %d at %s (signed in: %v): not the page to measure", path, t.Status, t.Path, t.SignedIn)
	}
	s := sample{ttfb: msDuration(t.TTFB), fcp: msDuration(t.FCP),
		usable: msDuration(max(t.LoadEnd, t.FCP)), complete: msDuration(max(t.LoadEnd, t.FCP, t.Settled)),
		serverCPU: serverCPU, databaseCPU: databaseCPU, browserCPU: browserCPU}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.requests {
		if r.finished && !r.failed && r.bytes > 0 { // not those the cache answered
			s.bytes += int64(r.bytes)
			s.requests++
		}
	}
	return s, nil
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// spki is the base64 SHA-256 of the server certificate's public key:
// Chromium trusts that one self-signed certificate and no other
// (--ignore-certificate-errors-spki-list), as a pinned client does.
func spki(certFile string) string {
	raw, err := os.ReadFile(filepath.Clean(certFile))
	if err != nil {
		log.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		log.Fatalf("%s holds no PEM block", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		log.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}
