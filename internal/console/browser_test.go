package console_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// chrome is a headless Chromium of Debian's (never a downloaded one)
// with one tab, trusting the lab server's certificate only.
type chrome struct {
	t         *testing.T
	l         *lab
	ctx       context.Context
	downloads string

	mu         sync.Mutex
	violations []string          // Content-Security-Policy reports
	names      map[string]string // downloads begun: GUID → suggested name
	completed  chan finished     // downloads finished
}

type finished struct{ guid, name string }

// shotsDir is where screenshots go: docs/ui when COFFER_UI_SCREENSHOTS=1
// (how docs/ui.md's pictures are made), else the test's own directory.
func shotsDir(t *testing.T) string {
	if os.Getenv("COFFER_UI_SCREENSHOTS") == "1" {
		return filepath.Join("..", "..", "docs", "ui")
	}
	return t.TempDir()
}

func (l *lab) chrome() *chrome {
	t := l.t
	t.Helper()
	exe := testutil.RequireBinary(t, "chromium")
	// No network lab comes or goes while this browser loads pages.
	testutil.LockNetwork(t)
	// Chromium's profile is not a t.TempDir: a helper process of the
	// browser may still write there after the browser is stopped, and
	// TempDir's cleanup then fails the test (a CI run did). It is removed
	// after the browser, again until those writes have stopped (5 s at
	// most; a profile left then is only disk in /tmp).
	profile, err := os.MkdirTemp("", "coffer-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for deadline := time.Now().Add(5 * time.Second); os.RemoveAll(profile) != nil || pathExists(profile); {
			if time.Now().After(deadline) {
				t.Logf("Chromium's profile %s is still written to; left behind", profile)
				return
			}
			time.Sleep(100 * time.Millisecond) // a retry's pace, not a synchronisation
		}
	})
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(profile),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1366, 900),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", l.spki()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	c := &chrome{t: t, l: l, ctx: ctx, downloads: t.TempDir(), names: map[string]string{}, completed: make(chan finished, 16)}
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Run starts the browser, bound to the context it is given:
	// this one, not one of run's timeouts.
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			// The console asks before it cancels or deletes (hx-confirm):
			// the test says yes, as the operator would.
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(true)) }()
		case *cdplog.EventEntryAdded:
			if strings.Contains(e.Entry.Text, "Content Security Policy") {
				c.mu.Lock()
				c.violations = append(c.violations, e.Entry.Text)
				c.mu.Unlock()
			}
		case *browser.EventDownloadWillBegin:
			c.mu.Lock()
			c.names[e.GUID] = e.SuggestedFilename
			c.mu.Unlock()
		case *browser.EventDownloadProgress:
			if e.State == browser.DownloadProgressStateCompleted {
				c.mu.Lock()
				name := c.names[e.GUID]
				c.mu.Unlock()
				c.completed <- finished{e.GUID, name}
			}
		}
	})
	c.run(cdplog.Enable(),
		browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorAllowAndName).WithDownloadPath(c.downloads).WithEventsEnabled(true))
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, v := range c.violations {
			t.Errorf("Content-Security-Policy violation: %s", v)
		}
	})
	return c
}

// run runs browser actions, bounded in time so a hang fails the test.
func (c *chrome) run(actions ...chromedp.Action) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var loc, body string
		_ = chromedp.Run(c.ctx, chromedp.Location(&loc), chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &body))
		c.t.Fatalf("browser: %v\nat %s:\n%s", err, loc, body)
	}
}

// clickAway clicks what leaves the page (a plain form's submit) and
// waits until the next page replaced it: the click is made by the page
// after the call returns, so the navigation it starts cannot cut a
// DevTools call short.
func (c *chrome) clickAway(sel string) {
	c.t.Helper()
	c.run(chromedp.WaitVisible(sel),
		chromedp.Evaluate(`setTimeout(() => document.querySelector(`+jsString(sel)+`).click(), 0)`, nil),
		chromedp.WaitNotPresent(sel), chromedp.WaitReady("body"))
}

// retype replaces an input's text, as typed (htmx sees the input).
func (c *chrome) retype(sel, text string) {
	c.t.Helper()
	c.run(chromedp.Evaluate(`document.querySelector(`+jsString(sel)+`).value = ""`, nil), chromedp.SendKeys(sel, text))
}

// open navigates to a path of the server.
func (c *chrome) open(path string) {
	c.t.Helper()
	if strings.Contains(path, "#") {
		// Only the fragment differs from the page shown: the browser
		// would not load it again.
		c.run(chromedp.Navigate("about:blank"))
	}
	c.run(chromedp.Navigate(c.l.srv.url+path), chromedp.WaitReady("body"))
}

func (c *chrome) text(sel string) string {
	c.t.Helper()
	var s string
	c.run(chromedp.WaitVisible(sel), chromedp.Text(sel, &s))
	return s
}

// count is how many elements sel selects now.
func (c *chrome) count(sel string) int {
	c.t.Helper()
	var n int
	c.run(chromedp.Evaluate(`document.querySelectorAll(`+jsString(sel)+`).length`, &n))
	return n
}

// waitText waits until the element's text contains want.
func (c *chrome) waitText(sel, want string) {
	c.t.Helper()
	js := `(() => { const e = document.querySelector(` + jsString(sel) + `); return !!e && e.innerText.includes(` + jsString(want) + `); })()`
	var ok bool
	c.run(chromedp.Poll(js, &ok, chromedp.WithPollingTimeout(80*time.Second)))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (c *chrome) location() string {
	var loc string
	c.run(chromedp.Location(&loc))
	return loc
}

// shot saves a screenshot of the whole page as name.png, after checking
// the page with axe-core: it fails on serious or critical accessibility
// violations.
func (c *chrome) shot(name string) {
	c.t.Helper()
	c.axe(name)
	var png []byte
	c.run(chromedp.FullScreenshot(&png, 100))
	if err := os.WriteFile(filepath.Join(shotsDir(c.t), name+".png"), png, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// axeViolation is a rule axe-core found broken.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// axe runs axe-core (web/node_modules, pinned in web/package-lock.json)
// on the page. It is evaluated through the DevTools protocol, so the
// page's Content-Security-Policy stays as strict as it is.
func (c *chrome) axe(page string) {
	c.t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "web", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		c.t.Fatalf("axe-core is missing (scripts/build-ui.sh installs it): %v", err)
	}
	var violations []axeViolation
	await := func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }
	c.run(chromedp.Evaluate(string(src), nil),
		chromedp.Evaluate(`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations)`, &violations, await))
	for _, v := range violations {
		if v.Impact == "serious" || v.Impact == "critical" {
			var where []string
			for _, n := range v.Nodes {
				where = append(where, n.HTML)
			}
			c.t.Errorf("page %s: accessibility (%s) %s: %s\n  %s", page, v.Impact, v.ID, v.Help, strings.Join(where, "\n  "))
		}
	}
}

// download waits for the next download to finish and returns its
// content and its suggested name.
func (c *chrome) download() ([]byte, string) {
	c.t.Helper()
	select {
	case d := <-c.completed:
		b, err := os.ReadFile(filepath.Join(c.downloads, d.guid))
		if err != nil {
			c.t.Fatal(err)
		}
		return b, d.name
	case <-time.After(90 * time.Second):
		c.t.Fatal("no download finished")
	}
	return nil, ""
}

func pathExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
