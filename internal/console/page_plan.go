package console

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/console/format"
)

// planView is a policy's predicted run (plan-policy) with the what-ifs
// the form asked for.
type planView struct {
	Name        string
	Mode        string
	WindowHours string
	WhatIf      string // one per line, as typed
	Plan        *api.Plan
	Capacity    *capacityView
	Err         string
}

// capacityView is the plan's capacity forecast as the page shows it:
// the size over the simulated runs as a sparkline, the dates as days
// and the growth in bytes.
type capacityView struct {
	C                      api.PlanCapacity
	Spark, Steady, Full    string
	PerDay, PerMonth, Repo string
}

func capacityOf(c api.PlanCapacity) *capacityView {
	v := &capacityView{C: c, PerDay: config.HumanBytes(int64(c.GrowthPerDayBytes)), PerMonth: config.HumanBytes(int64(c.GrowthPerMonthBytes)),
		Repo: config.HumanBytes(int64(c.Repository.GrowthPerDayBytes))}
	samples := make([]api.UsageSample, len(c.Curve))
	for i, s := range c.Curve {
		samples[i] = api.UsageSample{At: s.At, StoredBytes: s.SizeBytes}
	}
	v.Spark = format.Sparkline(samples)
	if c.SteadyAt != nil {
		v.Steady = c.SteadyAt.Local().Format(time.DateOnly)
	}
	if c.Repository.FullAt != nil {
		v.Full = c.Repository.FullAt.Local().Format(time.DateOnly)
	}
	return v
}

// planPage predicts a policy's run: the window's P50 and P90, the
// bottleneck and the critical path, beside the what-ifs typed in the
// form, as `coffer plan` does.
func (p *page) planPage() {
	q := p.r.URL.Query()
	v := planView{Name: p.r.PathValue("policy"), Mode: q.Get("mode"), WindowHours: q.Get("window_hours"), WhatIf: q.Get("what_if")}
	params := url.Values{}
	if v.Mode != "" {
		params.Set("mode", v.Mode)
	}
	if v.WindowHours != "" {
		h, err := strconv.ParseFloat(v.WindowHours, 64)
		if err != nil || h < 0 {
			v.Err = "the window is a number of hours, like 8 or 0.5"
			p.show("plan", "Plan of "+v.Name, "policies", v)
			return
		}
		params.Set("window_seconds", strconv.FormatFloat(h*3600, 'f', -1, 64))
	}
	for _, w := range strings.Split(v.WhatIf, "\n") {
		if w = strings.TrimSpace(w); w != "" {
			params.Add("what_if", w)
		}
	}
	var plan api.Plan
	if _, err := p.api.call("plan-policy", map[string]string{"policy": v.Name}, params, nil, &plan); err != nil {
		if ae, ok := err.(*apiError); ok && ae.Status == 401 {
			p.fail(err)
			return
		}
		v.Err = err.Error()
	} else {
		v.Plan, v.Capacity = &plan, capacityOf(plan.Capacity)
	}
	p.show("plan", "Plan of "+v.Name, "policies", v)
}
