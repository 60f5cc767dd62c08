package service

import (
	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/health"
	"github.com/coffer-backup/coffer/internal/policy"
)

// judgeForHealth is the health monitor's Judge: the fleet of cfg's
// connections judged as ProtectionSummary judges it (judgeFleet, the
// strictest RPO of a VM's policies), so that coffer_vms_outside_rpo,
// the rpo-missed notifications and the console's dashboard name the same
// VMs. Like the summary, it lists a connection whose inventory was never
// listed first.
func (s *Service) judgeForHealth(ctx context.Context, cfg *policy.Config, now time.Time) (health.Protection, error) {
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
	cat, err := s.openCatalog(ctx)
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
