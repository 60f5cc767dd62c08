package fleetops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/health"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/policy"
)

// judgeForHealth is the health monitor's Judge: the fleet of cfg's
// connections judged as ProtectionSummary judges it (judgeFleet, the
// strictest RPO of a VM's policies), so that coffer_vms_outside_rpo,
// the rpo-missed notifications and the console's dashboard name the same
// VMs. Like the summary, it lists a connection whose inventory was never
// listed first.
func (s Ops) judgeForHealth(ctx context.Context, cfg *policy.Config, now time.Time) (health.Protection, error) {
	out := health.Protection{VMs: map[string]int{}, OutsideByPolicy: map[string]int{}}
	for _, name := range rankNames {
		out.VMs[name] = 0 // a zero series to alert on, not an absent one
	}
	for _, p := range cfg.Policies {
		out.OutsideByPolicy[p.Name] = 0
	}
	var names []string
	for _, c := range cfg.Connections {
		names = append(names, c.Name)
	}
	if len(names) == 0 {
		return out, nil
	}
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return out, fmt.Errorf("the inventory is kept in the catalog: %w", err)
	}
	defer cat.Close()
	if _, err := s.inventoryStates(ctx, cfg, cat, names, false); err != nil {
		return out, err
	}
	judged, err := judgeFleet(ctx, cfg, cat, catalog.InventoryFilter{Connections: names}, nil, now)
	if err != nil {
		return out, err
	}
	r := rposOf(cfg)
	for _, j := range judged {
		out.VMs[rankNames[j.rank]]++
		if j.rank != rankOutsideRPO {
			continue
		}
		for _, p := range j.policies {
			out.OutsideByPolicy[p]++
		}
		held, rpo := r.strictest(j.policies)
		out.Outside = append(out.Outside, health.Miss{Policy: held, Connection: j.rec.Connection, VM: j.rec.Name, VMID: j.rec.ID,
			RPO: rpo, LastTime: j.last})
	}
	return out, nil
}

// HealthMonitor builds the monitor the server runs (internal/health): the
// catalog's state and the repositories' statistics into Config.Metrics,
// and the rpo-missed, repository-full and lock-lapsing notifications when
// notifying says so (nil: always). now is its clock (nil: time.Now).
func (s Ops) HealthMonitor(ctx context.Context, notifying func() bool, now func() time.Time) (*health.Monitor, error) {
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, err
	}
	ctl, err := s.Control(ctx)
	if err != nil {
		return nil, err
	}
	mcfg := s.Config.Maintenance.WithDefaults()
	return health.New(health.Options{Catalog: ctl.Catalog, Config: cfg, Judge: s.judgeForHealth, Repositories: s.watchedRepositories(cfg),
		Open: s.OpenNamed, Location: s.locationOfNamed, Capacity: capacities(mcfg), FullPercent: mcfg.RepositoryFull,
		LockWarning: time.Duration(mcfg.LockWarning), CheckEvery: time.Duration(mcfg.HealthEvery),
		StatsEvery: time.Duration(mcfg.StatsEvery), Metrics: s.Config.Metrics, Emitter: s.Emitter(ctx),
		Notifying: notifying, Logger: s.Logger(), Now: now}), nil
}

// watchedRepositories are the repositories the health monitor watches:
// the default one when it is configured, and every repositories entry.
func (s Ops) watchedRepositories(cfg *policy.Config) []string {
	var out []string
	if s.Config.Repository.Location != "" {
		out = append(out, service.DefaultRepositoryName)
	}
	for _, r := range cfg.Repositories {
		if r.Location != s.Config.Repository.Location {
			out = append(out, r.Name)
		}
	}
	return out
}

// locationOfNamed is where a repository named as maintenance names it
// is, in the configuration this process read last.
func (s Ops) locationOfNamed(name string) string {
	if name == service.DefaultRepositoryName {
		return s.Config.Repository.Location
	}
	cfg := s.Config.Engine
	if st := s.CachedConfig(); st != nil {
		cfg = st.Engine
	}
	return s.LocationOf(cfg, name)
}

func capacities(c maintenance.Config) map[string]int64 {
	out := map[string]int64{}
	for name, size := range c.Capacity {
		out[name] = int64(size)
	}
	return out
}
