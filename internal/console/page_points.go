package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coffer-backup/coffer/internal/api"
)

// Backup points: repository → VM → point, with verify, protect and
// forget. The lists come from the catalog a page at a time
// (list-catalog-points: newest first, continued after the page's last
// point with the API's Coffer-Next cursor), so they stay as fast with
// 100,000 points as with ten; a point's page reads its one manifest
// (list-points with point=), which holds what the catalog does not (its
// disks, new data, warnings, damage).

// pointsPageSize is how many points a page of the console shows.
const pointsPageSize = 50

type pointsView struct {
	Repo   string
	Repos  []string
	VM     string
	Points []api.BackupPoint
	// Next continues the listing after this page; First is the newest
	// page, when this is not it.
	Next, First string
	PageSize    int
}

// repo is the repository the request names, or the first one.
func (p *page) repo() string {
	if r := p.r.PathValue("repo"); r != "" {
		return r
	}
	if rs := p.c.cfg.Repositories(p.r.Context()); len(rs) > 0 {
		return rs[0]
	}
	return "default"
}

// catalogPage lists a page of the repository's points (of one VM when vm
// is set) from the catalog, after the request's cursor.
func (p *page) catalogPage(vm, path string) (pointsView, bool) {
	v := pointsView{Repo: p.repo(), Repos: p.c.cfg.Repositories(p.r.Context()), VM: vm, PageSize: pointsPageSize}
	q := url.Values{"repository": {v.Repo}, "limit": {strconv.Itoa(pointsPageSize)}}
	if vm != "" {
		q.Set("vm", vm)
	}
	after := p.r.URL.Query().Get("after")
	if after != "" {
		q.Set("after", after)
		v.First = path
	}
	h, err := p.api.call("list-catalog-points", nil, q, nil, &v.Points)
	if err != nil {
		p.fail(err)
		return v, false
	}
	if cursor := h.Get("Coffer-Next"); cursor != "" {
		v.Next = path + "?" + url.Values{"after": {cursor}}.Encode()
	}
	return v, true
}

// repository shows a repository's points, newest first, each with its
// VM (a link to all of that VM's points).
func (p *page) repository() {
	if vm := p.r.URL.Query().Get("vm"); vm != "" {
		// The search form: the VM's own pages.
		p.redirect("/ui/points/" + url.PathEscape(p.repo()) + "/vm/" + url.PathEscape(vm))
		return
	}
	v, ok := p.catalogPage("", "/ui/points/"+url.PathEscape(p.repo()))
	if !ok {
		return
	}
	p.show("points", "Backup points in "+v.Repo, "points", v)
}

func (p *page) vmPoints() {
	vm := p.r.PathValue("vm")
	v, ok := p.catalogPage(vm, "/ui/points/"+url.PathEscape(p.repo())+"/vm/"+url.PathEscape(vm))
	if !ok {
		return
	}
	p.show("vm", vm+" in "+v.Repo, "points", v)
}

type pointView struct {
	Repo  string
	Point api.BackupPoint
	// CopyRepos and CopyLibraries are where the point may be copied.
	CopyRepos, CopyLibraries []string
}

// point reads the point the request names (an ID or a unique prefix)
// from its manifest.
func (p *page) point() (api.BackupPoint, bool) {
	ref := p.r.PathValue("point")
	var pts []api.BackupPoint
	if _, err := p.api.call("list-points", map[string]string{"repo": p.repo()}, url.Values{"point": {ref}}, nil, &pts); err != nil {
		p.fail(err)
		return api.BackupPoint{}, false
	}
	if len(pts) != 1 {
		// The caller may not see it (list-points shows a point only to
		// who holds Repo.Audit on it).
		p.fail(&apiError{Status: http.StatusNotFound, Class: api.NotFound,
			Detail: fmt.Sprintf("no backup point %q in %s that you may see", ref, p.repo())})
		return api.BackupPoint{}, false
	}
	return pts[0], true
}

func (p *page) pointPage() {
	pt, ok := p.point()
	if !ok {
		return
	}
	v := pointView{Repo: p.repo(), Point: pt}
	v.CopyRepos, v.CopyLibraries = p.copyTargets()
	p.show("point", "Backup point "+pt.ShortID, "points", v)
}

// protectPoint protects the point, or releases it (protect).
func (p *page) protectPoint() {
	ref := p.r.PathValue("point")
	remove := p.form().Get("remove") == "1"
	var res []api.ProtectResult
	if _, err := p.api.call("protect", map[string]string{"repo": p.repo()}, nil, api.ProtectRequest{Points: []string{ref}, Remove: remove}, &res); err != nil {
		p.fail(err)
		return
	}
	msg := "The point is protected: forget and retention keep it."
	if remove {
		msg = "The point is no longer protected."
	}
	p.done(msg, "/ui/points/"+url.PathEscape(p.repo())+"/p/"+url.PathEscape(ref))
}

// forgetVM applies keep rules to a VM's points (forget), or shows what
// they would remove.
func (p *page) forgetVM() {
	vm := p.r.PathValue("vm")
	f := p.form()
	last, err := strconv.Atoi(f.Get("keep_last"))
	if err != nil || last < 1 {
		p.fail(&apiError{Status: http.StatusBadRequest, Class: api.Invalid, Detail: "keep the last: a number of points, 1 or more"})
		return
	}
	dry := f.Get("apply") != "1"
	var res api.ForgetResult
	if _, err := p.api.call("forget", map[string]string{"repo": p.repo()}, nil,
		api.ForgetRequest{Keep: api.KeepRules{Last: last}, VM: vm, DryRun: dry}, &res); err != nil {
		p.fail(err)
		return
	}
	p.fragment("vm/forget", forgetView{Repo: p.repo(), VM: vm, KeepLast: last, DryRun: dry, Result: res})
}

type forgetView struct {
	Repo, VM string
	KeepLast int
	DryRun   bool
	Result   api.ForgetResult
}

// verifyRepository checks the repository (verify): the structure, or
// every chunk's data too.
func (p *page) verifyRepository() {
	readData := p.form().Get("read_data") == "1"
	var rep api.VerifyReport
	_, err := p.api.call("verify", map[string]string{"repo": p.repo()}, nil, api.VerifyRequest{ReadData: readData}, &rep)
	if err != nil && rep.Points == 0 {
		p.fail(err)
		return
	}
	p.fragment("repositories/verified", verifyView{Report: rep, Err: errString(err)})
}

type verifyView struct {
	Report api.VerifyReport
	Err    string
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// gcRepository deletes what no point needs (gc), or says what it would.
func (p *page) gcRepository() {
	dry := p.form().Get("apply") != "1"
	var rep api.GCReport
	if _, err := p.api.call("gc", map[string]string{"repo": p.repo()}, nil, api.GCRequest{DryRun: dry}, &rep); err != nil {
		p.fail(err)
		return
	}
	p.fragment("repositories/gc", rep)
}
