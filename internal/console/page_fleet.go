package console

import (
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
)

// Inventory, policies and repositories.

type inventoryView struct {
	VMs         []api.VM
	Errors      []api.ConnectionError
	Connections []api.InventoryState // how old each connection's inventory is
	Filter      string
	Only        string
	Pager       pager
	Total       int
	Shown       int
	Problems    []string
}

func (p *page) inventory() {
	var inv api.Inventory
	q := p.r.URL.Query()
	v := inventoryView{Filter: q.Get("q"), Only: q.Get("only")}
	if err := p.inventoryPages(&inv); err != nil && inv.VMs == nil {
		if !p.partial(err, &v.Problems, "inventory") {
			return
		}
	}
	// Each VM is judged by its policies' RPO (a policy the caller may not
	// see counts with the default).
	var check api.PolicyCheck
	_, _ = p.api.call("check-policies", nil, url.Values{"offline": {"true"}}, nil, &check)
	r := rposOf(check)
	v.Errors, v.Connections, v.Total = inv.Errors, inv.Connections, len(inv.VMs)
	now := time.Now()
	var shown []api.VM
	for _, vm := range inv.VMs {
		if v.Filter != "" && !strings.Contains(strings.ToLower(vm.VM+" "+vm.Connection), strings.ToLower(v.Filter)) {
			continue
		}
		if v.Only == "unprotected" && r.rank(vm, now) == 3 {
			continue
		}
		shown = append(shown, vm)
	}
	// Unprotected VMs first: they are what the page is for.
	sort.SliceStable(shown, func(i, j int) bool { return r.rank(shown[i], now) < r.rank(shown[j], now) })
	v.Shown = len(shown)
	v.VMs, v.Pager = pageOf(shown, p.r, url.Values{"q": {v.Filter}, "only": {v.Only}}, "/ui/inventory")
	p.show("inventory", "Inventory", "inventory", v)
}

func (p *page) policies() {
	var check api.PolicyCheck
	if _, err := p.api.call("check-policies", nil, url.Values{"offline": {"true"}}, nil, &check); err != nil && check.Policies == nil {
		p.fail(err)
		return
	}
	p.show("policies", "Policies", "policies", check)
}

type policyView struct {
	Name    string
	Preview api.PolicyPreview
	Err     string
}

func (p *page) policy() {
	name := p.r.PathValue("policy")
	v := policyView{Name: name}
	if _, err := p.api.call("preview-policy", map[string]string{"policy": name}, url.Values{"runs": {"5"}}, nil, &v.Preview); err != nil {
		if v.Preview.Policy == "" {
			p.fail(err)
			return
		}
		v.Err = err.Error()
	}
	p.show("policy", "Policy "+name, "policies", v)
}

// runPolicy starts a run now (backup-policy) and opens its task.
func (p *page) runPolicy() {
	name := p.r.PathValue("policy")
	var j api.Job
	if _, err := p.api.call("backup-policy", map[string]string{"policy": name}, nil, nil, &j); err != nil {
		p.fail(err)
		return
	}
	p.redirect("/ui/tasks/" + itoa(j.ID))
}

type repositoriesView struct {
	Repos []repoView
}

type repoView struct {
	Name   string
	Stats  *api.Stats
	Usage  *usageView
	Leases []api.Lease
	Last   map[string]*api.Job
	Error  string
}

func (p *page) repositories() {
	var v repositoriesView
	for _, name := range p.c.cfg.Repositories(p.r.Context()) {
		r := repoView{Name: name, Last: map[string]*api.Job{}}
		params := map[string]string{"repo": name}
		var st api.Stats
		if _, err := p.api.call("stats", params, nil, nil, &st); err != nil {
			if ae, ok := err.(*apiError); ok && ae.Status == 401 {
				p.fail(err)
				return
			}
			r.Error = err.Error()
		} else {
			r.Stats = &st
			r.Usage = p.usage(name)
			_, _ = p.api.call("list-leases", params, nil, nil, &r.Leases)
		}
		for _, kind := range []string{"verify", "gc", "forget"} {
			var jobs []api.Job
			if _, err := p.api.call("list-jobs", nil, url.Values{"kind": {kind}, "limit": {"1"}}, nil, &jobs); err == nil && len(jobs) > 0 {
				r.Last[kind] = &jobs[0]
			}
		}
		v.Repos = append(v.Repos, r)
	}
	p.show("repositories", "Repositories", "repositories", v)
}

// inventoryPages reads every page of the server's inventory (the
// dashboard and the inventory page judge the whole fleet: unprotected
// VMs first). The error is the last page's, with its document.
func (p *page) inventoryPages(inv *api.Inventory) error {
	q := url.Values{"limit": {"1000"}}
	for {
		var page api.Inventory
		h, err := p.api.call("list-vms", nil, q, nil, &page)
		if page.VMs == nil {
			return err
		}
		if inv.VMs == nil {
			*inv = page
		} else {
			inv.VMs = append(inv.VMs, page.VMs...)
		}
		next := h.Get(api.NextHeader)
		if next == "" {
			return err
		}
		q.Set("after", next)
	}
}
