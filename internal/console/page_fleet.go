package console

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/coffer-backup/coffer/internal/api"
)

// Inventory, policies and repositories.

type inventoryView struct {
	VMs         []api.VM
	Errors      []api.ConnectionError
	Connections []api.InventoryState // how old each connection's inventory is
	Filter      string
	Only        string
	// Next continues the listing after this page; First is its first
	// page, when this is not it.
	Next, First string
	Total       int
	Shown       int
	Problems    []string
}

// inventory shows a page of the inventory, the VMs that need a look
// first: the server judges every VM against its RPO and orders them
// (list-vms order=attention), so the page reads one page of VMs.
func (p *page) inventory() {
	q := p.r.URL.Query()
	v := inventoryView{Filter: q.Get("q"), Only: q.Get("only")}
	filters := url.Values{}
	aq := url.Values{"order": {"attention"}, "limit": {strconv.Itoa(pageSize)}}
	if v.Filter != "" {
		aq.Set("search", v.Filter)
		filters.Set("q", v.Filter)
	}
	if v.Only == "unprotected" {
		aq.Set("attention", "true")
		filters.Set("only", v.Only)
	}
	if after := q.Get("after"); after != "" {
		aq.Set("after", after)
		v.First = "/ui/inventory?" + filters.Encode()
	}
	var inv api.Inventory
	h, err := p.api.call("list-vms", nil, aq, nil, &inv)
	if err != nil && inv.VMs == nil {
		if !p.partial(err, &v.Problems, "inventory") {
			return
		}
	}
	v.VMs, v.Errors, v.Connections = inv.VMs, inv.Errors, inv.Connections
	if inv.Counts != nil {
		v.Total, v.Shown = inv.Counts.Total, inv.Counts.Matched
	}
	if next := h.Get(api.NextHeader); next != "" {
		nq := url.Values{"after": {next}}
		for k, vs := range filters {
			nq[k] = vs
		}
		v.Next = "/ui/inventory?" + nq.Encode()
	}
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

// refreshInventory lists a connection's VMs into the inventory now
// (refresh-inventory, a task the call waits for), as the server's
// schedules do.
func (p *page) refreshInventory() {
	conn := p.r.PathValue("conn")
	var r api.InventoryRefresh
	if _, err := p.api.call("refresh-inventory", map[string]string{"conn": conn}, nil, nil, &r); err != nil {
		p.fail(err)
		return
	}
	busy := ""
	if r.Busy > 0 {
		busy = fmt.Sprintf(", %d busy (their last known state kept)", r.Busy)
	}
	p.done(fmt.Sprintf("%s: %d VMs listed now%s.", r.Connection, r.VMs, busy), "/ui/inventory")
}

type policyView struct {
	Name    string
	Preview api.PolicyPreview
	Err     string
	// Deletable: the API made the policy (the file's is changed there).
	Deletable bool
}

// policyKinds are the policies for the shared delete action: the editor
// makes and changes them (page_policy_edit.go); a deleted one's page is
// gone, so the browser goes back to the list.
var policyKinds = []configKind{{Kind: "policy", Plural: "policies", Page: "/ui/policies"}}

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
	var o api.ConfigObject
	if _, err := p.api.call("get-policy", map[string]string{"name": name}, nil, nil, &o); err == nil {
		v.Deletable = o.Source == "catalog"
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
	// RepairParts are what a repair mends, one part at a time: the
	// repair operation's "what" (api.RepairInput's enum), in the order
	// verify recommends them.
	RepairParts []string
	// Config is the repositories of the configuration, edited
	// (page_config.go); Problems what could not be read of it.
	Config   []configSection
	Problems []string
}

type repoView struct {
	Name   string
	Stats  *api.Stats
	Usage  *usageView
	Leases []api.Lease
	Keys   []api.Key
	Last   map[string]*api.Job
	Error  string
}

// repositoryKinds are the repositories of the configuration, edited on
// the Repositories page as page_config.go edits every kind. A
// repository's password stays in the file its password-file names.
var repositoryKinds = []configKind{
	{"repository", "repositories", "Repositories of the configuration",
		"Where backups are written, as entries of the file's repositories section: a location, and the password-file that opens it (none: the server's own password). A new location's storage is made once on the server's host with coffer init --repo LOCATION; the repository is then listed above with its points.",
		"name: offsite\nlocation: /srv/backup/offsite\n", "/ui/repositories"},
}

var repairParts = []string{"config", "keys", "index", "packs", "snapshots"}

func (p *page) repositories() {
	v := repositoriesView{RepairParts: repairParts}
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
			_, _ = p.api.call("list-keys", params, nil, nil, &r.Keys)
		}
		for _, kind := range []string{"verify", "gc", "forget"} {
			var jobs []api.Job
			if _, err := p.api.call("list-jobs", nil, url.Values{"kind": {kind}, "limit": {"1"}}, nil, &jobs); err == nil && len(jobs) > 0 {
				r.Last[kind] = &jobs[0]
			}
		}
		v.Repos = append(v.Repos, r)
	}
	var ok bool
	if v.Config, ok = p.configSections(repositoryKinds, &v.Problems); ok {
		p.show("repositories", "Repositories", "repositories", v)
	}
}
