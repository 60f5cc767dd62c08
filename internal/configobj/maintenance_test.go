package configobj

import (
	"errors"
	"strings"
	"testing"
)

// TestMaintenanceSchedulesAsObjects: a repository's maintenance jobs and
// a window created through the API join the file's section, the file's
// entry of a repository wins over the catalog's, a schedule naming an
// unknown window is refused as the file's would be, and deleting the
// policy a stored copy follows is refused.
func TestMaintenanceSchedulesAsObjects(t *testing.T) {
	s := fileState(t, file+`
maintenance:
  repositories:
    - {repository: main, gc: {schedule: "0 2 * * *"}}
`, stored("maintenance-window", "night", `{"name":"night","start":"22:00","end":"06:00"}`, 1),
		stored("maintenance-schedule", "main", `{"repository":"main","verify":{"schedule":"@daily"}}`, 1))
	if len(s.Maintenance.Windows) != 1 || len(s.Maintenance.Repositories) != 1 || s.Maintenance.Repositories[0].GC == nil {
		t.Fatalf("maintenance in effect: %+v", s.Maintenance)
	}
	if o, ok := s.Stored(MaintenanceSchedule, "main"); !ok || !o.Overridden {
		t.Fatalf("the catalog's schedule of main, which the file defines too: %+v", o)
	}
	if _, err := s.PlanCreate(MaintenanceSchedule, Spec{"repository": "main"}, validate); !errors.Is(err, ErrFileDefined) {
		t.Fatalf("creating the file's repository's schedule: %v", err)
	}
	if _, err := s.PlanCreate(MaintenanceSchedule, Spec{"repository": "default", "window": "day", "gc": map[string]any{"schedule": "@daily"}}, validate); err == nil ||
		!strings.Contains(err.Error(), `unknown window "day"`) {
		t.Fatalf("a schedule naming an unknown window: %v", err)
	}
	if _, err := s.PlanCreate(MaintenanceSchedule, Spec{"repository": "default", "window": "night",
		"copy": []any{map[string]any{"to": "main", "after": "other"}}}, validate); err == nil || !strings.Contains(err.Error(), `unknown policy "other"`) {
		t.Fatalf("a copy after an unknown policy: %v", err)
	}
	s2 := fileState(t, file, stored("policy", "other", `{"name":"other","connection":"lab"}`, 1),
		stored("maintenance-schedule", "default", `{"repository":"default","copy":[{"to":"main","after":"other"}]}`, 1))
	jobs, err := s2.Maintenance.Jobs(s2.Engine)
	if err != nil || len(jobs) != 1 || jobs[0].After != "other" {
		t.Fatalf("the stored copy after policy other: %+v %v", jobs, err)
	}
	if _, err := s2.PlanDelete(Policy, "other", validate); err == nil || !strings.Contains(err.Error(), `after: unknown policy "other"`) {
		t.Fatalf("deleting the policy a stored copy follows: %v", err)
	}
	if p, err := s2.PlanDelete(MaintenanceSchedule, "default", validate); err != nil || len(p.Maintenance.Repositories) != 0 {
		t.Fatalf("deleting the schedule: %+v %v", p, err)
	}
}
