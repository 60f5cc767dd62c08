package console

import (
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/console/format"
)

// The dashboard: what an operator checks first thing in the morning.

// countCap bounds the failures counted for the dashboard: beyond it the
// dashboard says "1000+" instead of reading the whole history.
const countCap = 1000

type dashboardView struct {
	Protection protection
	Running    []api.Job
	Failed24h  count
	Failed7d   count
	LastVerify *api.Job
	LastGC     *api.Job
	NextRuns   []api.PolicyReport
	Repos      []string
	Problems   []string // parts of the dashboard that could not be read
}

type protection struct {
	Total, Recent, Stale, NoPoint, Unprotected int
	Attention                                  []api.VM // the first VMs that need a look
	// DefaultRPO is what VMs whose policies set no rpo are held to;
	// WithRPO counts the policies that set one.
	DefaultRPO string
	WithRPO    int
}

type count struct {
	N    int
	More bool
}

func (p *page) dashboard() {
	v := dashboardView{Repos: p.c.cfg.Repositories(p.r.Context())}
	var sum api.ProtectionSummary
	if _, err := p.api.call("protection-summary", nil, nil, nil, &sum); err != nil {
		if !p.partial(err, &v.Problems, "inventory") {
			return
		}
	}
	v.Protection = protectionOf(sum)
	for _, e := range sum.Errors {
		v.Problems = append(v.Problems, "connection "+e.Connection+": "+e.Error)
	}
	var check api.PolicyCheck
	if _, err := p.api.call("check-policies", nil, url.Values{"offline": {"true"}}, nil, &check); err != nil {
		if !p.partial(err, &v.Problems, "policies") {
			return
		}
	}
	if _, err := p.api.call("list-jobs", nil, url.Values{"status": {"running"}, "limit": {"20"}}, nil, &v.Running); err != nil {
		if !p.partial(err, &v.Problems, "running tasks") {
			return
		}
	}
	now := time.Now()
	for _, c := range []struct {
		since time.Duration
		out   *count
	}{{24 * time.Hour, &v.Failed24h}, {7 * 24 * time.Hour, &v.Failed7d}} {
		var jobs []api.Job
		q := url.Values{"status": {"failed"}, "since": {now.Add(-c.since).UTC().Format(time.RFC3339)}, "limit": {strconv.Itoa(countCap)}}
		h, err := p.api.call("list-jobs", nil, q, nil, &jobs)
		if err != nil {
			if !p.partial(err, &v.Problems, "failures") {
				return
			}
		}
		*c.out = count{N: len(jobs), More: h.Get("Coffer-Next") != ""}
	}
	for _, c := range []struct {
		kind string
		out  **api.Job
	}{{"verify", &v.LastVerify}, {"gc", &v.LastGC}} {
		var jobs []api.Job
		if _, err := p.api.call("list-jobs", nil, url.Values{"kind": {c.kind}, "status": {"success"}, "limit": {"1"}}, nil, &jobs); err != nil {
			if !p.partial(err, &v.Problems, c.kind) {
				return
			}
		}
		if len(jobs) > 0 {
			*c.out = &jobs[0]
		}
	}
	for _, pol := range check.Policies {
		if !pol.NextRun.IsZero() {
			v.NextRuns = append(v.NextRuns, pol)
		}
	}
	sort.Slice(v.NextRuns, func(i, j int) bool { return v.NextRuns[i].NextRun.Before(v.NextRuns[j].NextRun) })
	p.show("dashboard", "Dashboard", "dashboard", v)
}

// partial notes a part of a page the caller may not see, or that failed,
// and reports whether the page goes on (false: the caller is not signed
// in, and was sent to sign in).
func (p *page) partial(err error, problems *[]string, what string) bool {
	if ae, ok := err.(*apiError); ok && ae.Status == 401 {
		p.fail(err)
		return false
	}
	*problems = append(*problems, what+": "+err.Error())
	return true
}

// protectionOf is the dashboard's tiles from the server's summary (the
// service judges each VM against its RPO: protection-summary).
func protectionOf(sum api.ProtectionSummary) protection {
	return protection{Total: sum.Total, Recent: sum.WithinRPO, Stale: sum.OutsideRPO, NoPoint: sum.NoPoint,
		Unprotected: sum.NoPolicy, Attention: sum.Attention, DefaultRPO: format.Duration(sum.DefaultRPOSeconds), WithRPO: sum.PoliciesWithRPO}
}

// repoUsage is the repository panel, loaded after the page (reading a
// repository's statistics takes longer than the rest).
type repoUsage struct {
	Name  string
	Stats *api.Stats
	Usage *usageView
	Error *problem
}

func (p *page) dashboardRepos() {
	var out []repoUsage
	for _, name := range p.c.cfg.Repositories(p.r.Context()) {
		u := repoUsage{Name: name}
		var st api.Stats
		if _, err := p.api.call("stats", map[string]string{"repo": name}, nil, nil, &st); err != nil {
			ae, _ := err.(*apiError)
			if ae == nil {
				ae = &apiError{Detail: err.Error()}
			}
			u.Error = &problem{Message: ae.Detail, Denied: ae.Denied()}
		} else {
			u.Stats = &st
			u.Usage = p.usage(name)
		}
		out = append(out, u)
	}
	p.fragment("dashboard/repos", out)
}

// plannerRecord is the dashboard's panel of the planner held to its
// record: each policy's predictions beside its runs (plan-accuracies),
// loaded after the page as the repositories are, since it reads every
// policy's last runs.
type plannerRecord struct {
	Policies    []api.PlanAccuracy
	Unpredicted []string
	Error       *problem
}

func (p *page) dashboardPlanner() {
	var v plannerRecord
	var doc api.PlanAccuracies
	if _, err := p.api.call("plan-accuracies", nil, nil, nil, &doc); err != nil {
		ae, _ := err.(*apiError)
		if ae == nil {
			ae = &apiError{Detail: err.Error()}
		}
		v.Error = &problem{Message: ae.Detail, Denied: ae.Denied()}
	} else {
		v.Policies, v.Unpredicted = doc.Policies, doc.Unpredicted
	}
	p.fragment("dashboard/planner", v)
}
