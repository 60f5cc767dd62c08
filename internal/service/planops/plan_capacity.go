package planops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/health"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/plan"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/gc"
)

// capacityCurve bounds the forecast's sizes a plan lists.
const capacityCurve = 60

// inventories are the connections' VMs read so far by one plan.
type inventories map[string][]hypervisor.VM

func (s Ops) inventoryOnce(ctx context.Context, cfg *policy.Config, seen inventories, conn string) ([]hypervisor.VM, error) {
	if vms, ok := seen[conn]; ok {
		return vms, nil
	}
	vms, err := s.inventory(ctx, cfg, conn)
	if err == nil {
		seen[conn] = vms
	}
	return vms, err
}

// planCapacity forecasts what the policy's retention holds in its
// repository (internal/plan/capacity.go), and what every policy writing
// there holds against what the repository's store can take. What cannot
// be read (another policy's inventory, the store) is said, not failed.
// The returned repoForecast sets a what-if's own forecast of the policy
// beside the rest of the repository (nil without a forecast).
func (s Ops) planCapacity(ctx context.Context, cat catalog.Catalog, cfg *policy.Config, p policy.Policy,
	targets []plan.Target, hist *plan.History, jobs int, seen inventories) (api.PlanCapacity, *repoForecast) {
	now := time.Now()
	name := cmp.Or(p.Repository, service.DefaultRepository)
	info := s.repositoryInfo(ctx, cfg, p.Repository)
	f, in, as, err := forecastPolicy(ctx, cat, p, targets, hist, info.chunkSize, now)
	doc := api.PlanCapacity{Retention: p.Retention.String(), Schedule: cmp.Or(p.Schedule, plan.AssumedSchedule+" (assumed)"),
		Assumptions: append([]string{}, as...), Notes: []string{}, Curve: []api.PlanCapacitySample{},
		Repository: api.PlanRepositoryCapacity{Name: name, Policies: []api.PlanPolicyCapacity{}, CapacityBytes: -1, FreeBytes: -1}}
	if err != nil {
		doc.Notes = append(doc.Notes, "no forecast: "+err.Error())
		doc.Repository.Full = "no full date: no forecast"
		return doc, nil
	}
	capacityFigures(&doc, f, in)
	rc := api.PlanRepositoryCapacity{Name: name, Policies: []api.PlanPolicyCapacity{policyShare(p.Name, len(targets), f)}}
	forecasts := []*plan.CapacityForecast{f}
	for _, other := range cfg.Policies {
		if other.Name == p.Name || other.Repository != p.Repository {
			continue
		}
		of, n, err := s.forecastOther(ctx, cat, cfg, other, jobs, info.chunkSize, now, seen)
		if err != nil {
			rc.Policies = append(rc.Policies, api.PlanPolicyCapacity{Policy: other.Name, Error: err.Error()})
			continue
		}
		rc.Policies = append(rc.Policies, policyShare(other.Name, n, of))
		forecasts = append(forecasts, of)
	}
	for _, pc := range rc.Policies {
		rc.PeakBytes += pc.PeakBytes
		rc.GrowthPerDayBytes += pc.GrowthPerDayBytes
	}
	s.storeSpace(ctx, cat, &rc, info, now)
	rf := &repoForecast{policy: f, vms: len(targets), others: forecasts[1:], free: rc.FreeBytes, capacity: rc.Capacity,
		chunkSize: info.chunkSize, now: now}
	rc.FullAt, rc.Full = rf.full(forecasts)
	doc.Repository = rc
	return doc, rf
}

// repoForecast is a repository's forecast around one policy: what a
// what-if's own forecast of the policy is set beside.
type repoForecast struct {
	policy    *plan.CapacityForecast // the policy as configured
	vms       int
	others    []*plan.CapacityForecast // the repository's other policies
	free      int64                    // -1: unknown, capacity says why
	capacity  string
	chunkSize int
	now       time.Time
}

// full is when the forecasts fill the repository's free space, in words.
func (rf *repoForecast) full(forecasts []*plan.CapacityForecast) (*time.Time, string) {
	if rf.free < 0 {
		return nil, "no full date: " + rf.capacity
	}
	full := plan.WhenFull(forecasts, rf.now, float64(rf.free))
	forever := false
	var growth float64
	for _, f := range forecasts {
		forever = forever || f.Steady.IsZero()
		growth += f.GrowthPerDay
	}
	switch {
	case full.IsZero() && forever:
		return nil, fmt.Sprintf("not full within a century: %s free, growing %s a day", config.HumanBytes(rf.free),
			config.HumanBytes(int64(growth)))
	case full.IsZero():
		return nil, fmt.Sprintf("not full: the policies grow by at most %s from now, %s is free",
			config.HumanBytes(int64(grownAtMost(forecasts, rf.now))), config.HumanBytes(rf.free))
	default:
		return &full, fmt.Sprintf("full on %s: the policies grow by more than the %s free by then", full.Format(time.DateOnly),
			config.HumanBytes(rf.free))
	}
}

// scenario is the capacity under one scenario, the policy forecast as f
// over vms VMs (nil rf: there is no forecast, for the reason given).
func (rf *repoForecast) scenario(f *plan.CapacityForecast, vms int, noForecast string) api.PlanScenarioCapacity {
	if rf == nil || f == nil {
		return api.PlanScenarioCapacity{VMs: vms, Full: "no full date: no forecast", Error: noForecast}
	}
	out := api.PlanScenarioCapacity{VMs: vms, PeakBytes: int64(f.Peak.Bytes()), GrowthPerDayBytes: f.GrowthPerDay,
		RepositoryPeakBytes: int64(f.Peak.Bytes())}
	for _, o := range rf.others {
		out.RepositoryPeakBytes += int64(o.Peak.Bytes())
	}
	out.FullAt, out.Full = rf.full(append([]*plan.CapacityForecast{f}, rf.others...))
	return out
}

// whatIfCapacity is the capacity under each scenario of a plan: the
// configured forecast for the scenario as configured and for what-ifs
// that keep the same points; a forecast of its own for a what-if that
// changes them (add-vms), with its VMs and their recorded history.
func (s Ops) whatIfCapacity(ctx context.Context, cat catalog.Catalog, sc plan.Scenario, vs []plan.Variation,
	rf *repoForecast, noForecast string) []api.PlanScenarioCapacity {
	out := []api.PlanScenarioCapacity{}
	if rf == nil {
		for range len(vs) + 1 {
			out = append(out, rf.scenario(nil, 0, noForecast))
		}
		return out
	}
	out = append(out, rf.scenario(rf.policy, rf.vms, ""))
	for _, v := range vs {
		if !v.ChangesKept() {
			out = append(out, out[0])
			continue
		}
		varied, err := v.Apply(sc)
		if err != nil {
			out = append(out, rf.scenario(nil, 0, err.Error()))
			continue
		}
		f, _, _, err := forecastPolicy(ctx, cat, sc.Policy, varied.Targets, varied.History, rf.chunkSize, rf.now)
		if err != nil {
			out = append(out, rf.scenario(nil, len(varied.Targets), err.Error()))
			continue
		}
		out = append(out, rf.scenario(f, len(varied.Targets), ""))
	}
	return out
}

// forecastPolicy forecasts one policy's retention over its VMs.
func forecastPolicy(ctx context.Context, cat catalog.Catalog, p policy.Policy, targets []plan.Target, hist *plan.History,
	chunkSize int, now time.Time) (*plan.CapacityForecast, plan.CapacityInput, []string, error) {
	in, as := plan.BuildCapacity(plan.CapacitySources{Policy: p, Targets: targets, History: hist, Now: now, ChunkSize: chunkSize})
	first, err := plan.FirstRun(ctx, cat, p.Name, now.Add(-plan.Lookback(in)))
	if err != nil {
		return nil, in, as, err
	}
	in.First = first
	f, err := plan.ForecastCapacity(in)
	return f, in, as, err
}

// forecastOther forecasts another policy of the repository: its
// selection now, its recorded runs.
func (s Ops) forecastOther(ctx context.Context, cat catalog.Catalog, cfg *policy.Config, p policy.Policy, jobs, chunkSize int,
	now time.Time, seen inventories) (*plan.CapacityForecast, int, error) {
	var targets []plan.Target
	for _, c := range p.ConnectionNames() {
		vms, err := s.inventoryOnce(ctx, cfg, seen, c)
		if err != nil {
			return nil, 0, fmt.Errorf("inventory of connection %s: %w", c, err)
		}
		targets = append(targets, plan.Selected(p, c, vms)...)
	}
	hist, err := plan.ReadHistory(ctx, cat, p.Name, jobs)
	if err != nil {
		return nil, 0, err
	}
	f, _, _, err := forecastPolicy(ctx, cat, p, targets, hist, chunkSize, now)
	return f, len(targets), err
}

// capacityFigures fills the policy's figures from its forecast.
func capacityFigures(doc *api.PlanCapacity, f *plan.CapacityForecast, in plan.CapacityInput) {
	var added float64
	for _, v := range in.VMs {
		doc.UsedBytes += int64(v.Used)
		doc.ChangePerRunBytes += int64(v.Change)
		doc.Reduction += v.Used * v.Reduction
		added += v.Used
	}
	if added > 0 {
		doc.Reduction /= added
	}
	doc.RunsPerDay, doc.StartedAt = f.RunsPerDay, f.Start
	if !f.Steady.IsZero() {
		doc.SteadyAt = &f.Steady
	}
	doc.PeakBytes, doc.PeakDataBytes, doc.PeakMetadataBytes = int64(f.Peak.Bytes()), int64(f.Peak.Data), int64(f.Peak.Metadata)
	doc.PeakAt, doc.PeakPoints, doc.LowBytes, doc.NowBytes = f.Peak.At, f.Peak.Points, int64(f.Low.Bytes()), int64(f.Now.Bytes())
	doc.GrowthPerDayBytes = f.GrowthPerDay
	doc.GrowthPerMonthBytes = f.GrowthPerDay * 365.25 / 12
	doc.PackSlackBytes = int64(f.Peak.Bytes() * gc.DefaultRepackThreshold / (1 - gc.DefaultRepackThreshold))
	n := len(f.Sizes)
	for i := range min(n, capacityCurve) {
		k := i * n / min(n, capacityCurve)
		if i == min(n, capacityCurve)-1 {
			k = n - 1
		}
		doc.Curve = append(doc.Curve, api.PlanCapacitySample{At: f.Sizes[k].At, SizeBytes: int64(f.Sizes[k].Bytes())})
	}
	if f.Resumed {
		doc.Notes = append(doc.Notes, fmt.Sprintf("the policy's first run is older than anything its retention keeps: simulated from %s",
			f.Start.Format(time.DateOnly)))
	}
	if f.Truncated {
		doc.Notes = append(doc.Notes, fmt.Sprintf("the schedule runs too often to simulate the retention's whole reach: stopped after %d runs, at %s",
			n, f.Sizes[n-1].At.Format(time.DateOnly)))
	}
	if in.Retention.Empty() {
		doc.Notes = append(doc.Notes, "the retention keeps every point: no steady state; the peak is the size a year from now")
	}
}

func policyShare(name string, vms int, f *plan.CapacityForecast) api.PlanPolicyCapacity {
	return api.PlanPolicyCapacity{Policy: name, VMs: vms, PeakBytes: int64(f.Peak.Bytes()), NowBytes: int64(f.Now.Bytes()),
		GrowthPerDayBytes: f.GrowthPerDay}
}

// grownAtMost is the most the forecasts grow by from now, together.
func grownAtMost(fs []*plan.CapacityForecast, now time.Time) float64 {
	var most float64
	for _, f := range fs {
		most += max(f.Peak.Bytes()-f.Now.Bytes(), 0)
	}
	return most
}

// repositoryInfo is what the forecast reads of a repository without its
// password: its plaintext config (ID, chunk size) and where it is.
type repositoryInfo struct {
	location, id string
	chunkSize    int
	err          error
}

func (s Ops) repositoryInfo(ctx context.Context, cfg *policy.Config, name string) repositoryInfo {
	info := repositoryInfo{location: s.LocationOf(cfg, name), chunkSize: repo.DefaultChunkSize}
	st, err := s.OpenStore(ctx, info.location)
	if err != nil {
		info.err = err
		return info
	}
	defer st.Close()
	c, err := repo.ReadConfig(ctx, st)
	if err != nil {
		info.err = err
		return info
	}
	info.id, info.chunkSize = c.ID, c.ChunkSize
	return info
}

// storeSpace is what the repository's store holds and may hold: the
// newest usage sample the server recorded, the file system's free space
// of a directory, or the capacity configured for an object store
// (maintenance: capacity:).
func (s Ops) storeSpace(ctx context.Context, cat catalog.Catalog, rc *api.PlanRepositoryCapacity, info repositoryInfo, now time.Time) {
	rc.CapacityBytes, rc.FreeBytes = -1, -1
	if u, ok := catalog.UsageOf(cat); ok && info.id != "" {
		if samples, err := u.ListUsageSamples(ctx, info.id, now.Add(-service.UsageWindow)); err == nil && len(samples) > 0 {
			rc.StoredBytes = samples[len(samples)-1].StoredBytes
		}
	}
	var configured int64
	if s.Config.Maintenance != nil {
		configured = int64(s.Config.Maintenance.Capacity[rc.Name])
	}
	free, err := health.FreeBytes(info.location)
	switch {
	case err == nil:
		rc.FreeBytes = free
		rc.Capacity = "its directory's file system: free space now"
		if rc.StoredBytes > 0 {
			rc.CapacityBytes = rc.StoredBytes + free
		}
		if configured > 0 && rc.StoredBytes > 0 && configured-rc.StoredBytes < free {
			rc.CapacityBytes, rc.FreeBytes = configured, max(configured-rc.StoredBytes, 0)
			rc.Capacity = "maintenance capacity, less the newest usage sample"
		}
	case !errors.Is(err, health.ErrNotLocal):
		rc.Capacity = fmt.Sprintf("unknown: the free space of %s cannot be read: %v", info.location, err)
	case configured > 0 && rc.StoredBytes > 0:
		rc.CapacityBytes, rc.FreeBytes = configured, max(configured-rc.StoredBytes, 0)
		rc.Capacity = "maintenance capacity, less the newest usage sample"
	case configured > 0:
		rc.CapacityBytes = configured
		rc.Capacity = "unknown free space: maintenance capacity is set, but the server has recorded no usage sample yet (coffer server records one each stats-every)"
	default:
		rc.Capacity = "unknown: an object store tells no capacity; set maintenance capacity: {" + rc.Name + ": SIZE}"
	}
	if info.err != nil {
		rc.Capacity += fmt.Sprintf("; the repository's config could not be read (%v): default chunk size assumed", info.err)
	}
}
