package console

import (
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// Boot verification: a point's page starts one (verify-boot, a task whose
// live page the browser follows), and shows the result the repository
// keeps for it (get-boot-verification): the ladder, each step's evidence,
// the console's tail and the screenshot (get-boot-screenshot, an image
// the page loads). A repository's page lists every kept result
// (list-boot-verifications).

type bootView struct {
	Repo, Point, VM string
	// Result is nil when the point was never verified.
	Result        *api.BootVerification
	HasScreenshot bool
	Steps         []bootStepView
}

type bootStepView struct {
	api.BootStep
	Evidence [][2]string // sorted by name
}

// bootPage shows the point's kept result, or says that there is none,
// with the form that runs one.
func (p *page) bootPage() {
	pt, ok := p.point()
	if !ok {
		return
	}
	v := bootView{Repo: p.repo(), Point: pt.ID, VM: pt.VM}
	if pt.BootVerification != nil {
		var doc api.BootVerification
		params := map[string]string{"repo": v.Repo, "point": pt.ID}
		if _, err := p.api.call("get-boot-verification", params, nil, nil, &doc); err != nil {
			p.fail(err)
			return
		}
		v.HasScreenshot = len(doc.ScreenshotPNG) > 0
		doc.ScreenshotPNG = nil // the page loads it as an image
		v.Result = &doc
		for _, st := range doc.Steps {
			sv := bootStepView{BootStep: st}
			for k, val := range st.Evidence {
				sv.Evidence = append(sv.Evidence, [2]string{k, val})
			}
			sort.Slice(sv.Evidence, func(i, j int) bool { return sv.Evidence[i][0] < sv.Evidence[j][0] })
			v.Steps = append(v.Steps, sv)
		}
	}
	p.show("boot", "Boot verification of "+pt.ShortID, "points", v)
}

// bootScreenshot answers the kept result's screenshot (a PNG).
func (p *page) bootScreenshot() {
	h, body, err := p.api.stream("get-boot-screenshot", p.pointParams(), nil, nil)
	if err != nil {
		p.fail(err)
		return
	}
	defer body.Close()
	p.w.Header().Set("Content-Type", h.Get("Content-Type"))
	if _, err := io.Copy(p.w, body); err != nil {
		panic(http.ErrAbortHandler)
	}
}

// verifyBoot boots the point isolated and runs the ladder (verify-boot),
// as a task.
func (p *page) verifyBoot() {
	f := p.form()
	body := api.VerifyBootRequest{Marker: strings.TrimSpace(f.Get("marker")), Probes: []string{}}
	for _, line := range strings.Split(f.Get("probes"), "\n") {
		if pr := strings.TrimSpace(line); pr != "" {
			body.Probes = append(body.Probes, pr)
		}
	}
	if m := strings.TrimSpace(f.Get("timeout_minutes")); m != "" {
		n, err := strconv.ParseFloat(m, 64)
		if err != nil || n <= 0 {
			p.refuse("the time allowed is a number of minutes, more than 0")
			return
		}
		body.TimeoutSeconds = n * 60
	}
	id, err := p.startTask("verify-boot", p.pointParams(), nil, body, nil)
	p.started(id, err, "The point is verified.")
}

type bootsView struct {
	Repo    string
	Repos   []string
	VM      string
	Results []api.BootVerificationEntry
}

// bootList lists the results a repository keeps (of one VM with ?vm=).
func (p *page) bootList() {
	v := bootsView{Repo: p.repo(), Repos: p.c.cfg.Repositories(p.r.Context()), VM: p.r.URL.Query().Get("vm")}
	var q url.Values
	if v.VM != "" {
		q = url.Values{"vm": {v.VM}}
	}
	if _, err := p.api.call("list-boot-verifications", map[string]string{"repo": v.Repo}, q, nil, &v.Results); err != nil {
		p.fail(err)
		return
	}
	p.show("boots", "Boot verifications in "+v.Repo, "points", v)
}
