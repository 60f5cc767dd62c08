package console

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// Backup points: repository → VM → point, with verify, protect and
// forget. The repository lists its points from its manifests
// (list-points); the console pages what it shows.

type pointsView struct {
	Repo   string
	Repos  []string
	VMs    []vmPoints
	Total  int
	Pager  pager
	Result string
}

// vmPoints is a VM (or disk image source) of a repository and its points.
type vmPoints struct {
	Name, Kind, Connection string
	Count                  int
	Latest                 api.BackupPoint
	Protected              int
}

// pager pages a list the console holds whole: Page is 1-based.
type pager struct {
	Page, Pages int
	Prev, Next  string
}

func pageOf[T any](items []T, r *http.Request, base url.Values, path string) ([]T, pager) {
	n, _ := strconv.Atoi(r.URL.Query().Get("page"))
	pages := max(1, (len(items)+pageSize-1)/pageSize)
	n = min(max(n, 1), pages)
	pg := pager{Page: n, Pages: pages}
	link := func(k int) string {
		q := url.Values{}
		for key, v := range base {
			q[key] = v
		}
		q.Set("page", strconv.Itoa(k))
		return path + "?" + q.Encode()
	}
	if n > 1 {
		pg.Prev = link(n - 1)
	}
	if n < pages {
		pg.Next = link(n + 1)
	}
	lo := (n - 1) * pageSize
	return items[lo:min(len(items), lo+pageSize)], pg
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

func (p *page) points(vm string) ([]api.BackupPoint, bool) {
	var q url.Values
	if vm != "" {
		q = url.Values{"vm": {vm}}
	}
	var pts []api.BackupPoint
	if _, err := p.api.call("list-points", map[string]string{"repo": p.repo()}, q, nil, &pts); err != nil {
		p.fail(err)
		return nil, false
	}
	// Newest first, as operators look for them.
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].Time.After(pts[j].Time) })
	return pts, true
}

func (p *page) repository() {
	pts, ok := p.points("")
	if !ok {
		return
	}
	byVM := map[string]*vmPoints{}
	var order []string
	for _, pt := range pts {
		v := byVM[pt.VM]
		if v == nil {
			v = &vmPoints{Name: pt.VM, Kind: pt.SourceKind, Connection: pt.Connection, Latest: pt}
			byVM[pt.VM] = v
			order = append(order, pt.VM)
		}
		v.Count++
		if pt.Protected {
			v.Protected++
		}
	}
	sort.Strings(order)
	all := make([]vmPoints, 0, len(order))
	for _, name := range order {
		all = append(all, *byVM[name])
	}
	v := pointsView{Repo: p.repo(), Repos: p.c.cfg.Repositories(p.r.Context()), Total: len(pts)}
	v.VMs, v.Pager = pageOf(all, p.r, nil, "/ui/points/"+url.PathEscape(v.Repo))
	p.show("points", "Backup points in "+v.Repo, "points", v)
}

type vmView struct {
	Repo, VM string
	Points   []api.BackupPoint
	Pager    pager
}

func (p *page) vmPoints() {
	vm := p.r.PathValue("vm")
	pts, ok := p.points(vm)
	if !ok {
		return
	}
	v := vmView{Repo: p.repo(), VM: vm}
	v.Points, v.Pager = pageOf(pts, p.r, nil, "/ui/points/"+url.PathEscape(v.Repo)+"/vm/"+url.PathEscape(vm))
	p.show("vm", vm+" in "+v.Repo, "points", v)
}

type pointView struct {
	Repo  string
	Point api.BackupPoint
}

// point finds a point of the repository by ID or unique prefix.
func (p *page) point() (api.BackupPoint, bool) {
	ref := p.r.PathValue("point")
	pts, ok := p.points("")
	if !ok {
		return api.BackupPoint{}, false
	}
	var found []api.BackupPoint
	for _, pt := range pts {
		if pt.ID == ref || strings.HasPrefix(pt.ID, ref) && len(ref) >= 4 {
			found = append(found, pt)
		}
	}
	if len(found) != 1 {
		p.fail(&apiError{Status: http.StatusNotFound, Class: api.NotFound,
			Detail: fmt.Sprintf("no single backup point %q in %s that you may see", ref, p.repo())})
		return api.BackupPoint{}, false
	}
	return found[0], true
}

func (p *page) pointPage() {
	pt, ok := p.point()
	if !ok {
		return
	}
	p.show("point", "Backup point "+pt.ShortID, "points", pointView{Repo: p.repo(), Point: pt})
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
