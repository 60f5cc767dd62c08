package fleetcmd

import (
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/config"
)

// printCapacity shows the capacity forecast of a plan: the policy's
// steady state and growth, then its repository's policies against what
// the store can hold.
func (a *app) printCapacity(doc *api.Plan) {
	c := doc.Capacity
	b := func(n int64) string { return config.HumanBytes(n) }
	a.Printf("capacity (%s; schedule %s, %.2g runs a day):\n", c.Retention, c.Schedule, c.RunsPerDay)
	a.Printf("  %d VMs: %s used, %s added a run, stored at %.2f of it\n", doc.VMs, b(c.UsedBytes), b(c.ChangePerRunBytes), c.Reduction)
	if c.SteadyAt != nil {
		a.Printf("  steady state from %s: %s to %s (peak %s: %d points a VM, %s data, %s metadata); packs gc has not repacked may add up to %s\n",
			c.SteadyAt.Format(time.DateOnly), b(c.LowBytes), b(c.PeakBytes), c.PeakAt.Format(time.DateOnly), c.PeakPoints,
			b(c.PeakDataBytes), b(c.PeakMetadataBytes), b(c.PackSlackBytes))
		a.Printf("  growth until then: %s a day, %s a month; now %s\n", b(int64(c.GrowthPerDayBytes)), b(int64(c.GrowthPerMonthBytes)), b(c.NowBytes))
	} else if c.PeakPoints > 0 {
		a.Printf("  no steady state: %s a day, %s a month; now %s, %s on %s\n", b(int64(c.GrowthPerDayBytes)), b(int64(c.GrowthPerMonthBytes)),
			b(c.NowBytes), b(c.PeakBytes), c.PeakAt.Format(time.DateOnly))
	}
	r := c.Repository
	if r.Name != "" {
		space := "capacity " + r.Capacity
		if r.FreeBytes >= 0 {
			space = fmt.Sprintf("%s free (%s)", b(r.FreeBytes), r.Capacity)
		}
		a.Printf("  repository %s (%s writing there): peak %s together; %s\n", r.Name, plural(len(r.Policies), "policy", "policies"), b(r.PeakBytes), space)
		for _, p := range r.Policies {
			if p.Error != "" {
				a.Printf("    %s: not forecast: %s\n", p.Policy, p.Error)
				continue
			}
			a.Printf("    %s: %d VMs, peak %s, now %s, %s a day until steady\n", p.Policy, p.VMs, b(p.PeakBytes), b(p.NowBytes), b(int64(p.GrowthPerDayBytes)))
		}
		a.Printf("  %s\n", r.Full)
	}
	for _, n := range c.Notes {
		a.Printf("  note: %s\n", n)
	}
	for _, s := range c.Assumptions {
		a.Printf("  assumed: %s\n", s)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
