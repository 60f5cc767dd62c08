package backup_test

import (
	"maps"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
)

// TestPlanVM: what a VM's backup is relative to, decided from the history
// alone, and the change sets its snapshot asks for.
func TestPlanVM(t *testing.T) {
	vm := repo.Source{Kind: "mem", Connection: "lab", VMID: "vm-1", VMName: "one"}
	other := repo.Source{Kind: "mem", Connection: "lab", VMID: "vm-2", VMName: "two"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	point := func(src repo.Source, hours int, mode string, job int64, disks ...repo.Disk) *repo.Point {
		return &repo.Point{ID: id.Random(), Time: t0.Add(time.Duration(hours) * time.Hour), Source: src, Mode: mode, JobID: job, Disks: disks}
	}
	full := point(vm, 0, "full", 1, repo.Disk{Key: "a", ChangeToken: "a1"}, repo.Disk{Key: "b", ChangeToken: "b1"})
	// The disk set changed since the full: b's tracking was distrusted (its
	// token dropped), c was added.
	incr := point(vm, 1, "incremental", 2, repo.Disk{Key: "a", ChangeToken: "a2"}, repo.Disk{Key: "b"}, repo.Disk{Key: "c", ChangeToken: "c2"})
	// Newer points of another VM are no base of this one.
	elsewhere := point(other, 2, "full", 3, repo.Disk{Key: "a", ChangeToken: "x"})
	history := []*repo.Point{elsewhere, incr, full} // not in time order
	// The full was forgotten: the incremental left has no full to be
	// differential to.
	broken := []*repo.Point{incr, elsewhere}

	for _, tc := range []struct {
		name                   string
		history                []*repo.Point
		mode                   string
		wantMode               string
		base, parent, baseFull *repo.Point
		since                  map[string]string
	}{
		{name: "no history", mode: "incremental", wantMode: "full"},
		{name: "only another VM's points", history: []*repo.Point{elsewhere}, mode: "differential", wantMode: "full"},
		{name: "full asked", history: history, mode: "full", wantMode: "full", parent: incr, baseFull: full},
		{name: "incremental to the newest point", history: history, mode: "incremental", wantMode: "incremental",
			base: incr, parent: incr, baseFull: full, since: map[string]string{"a": "a2", "c": "c2"}},
		{name: "no mode is incremental", history: history, wantMode: "incremental",
			base: incr, parent: incr, baseFull: full, since: map[string]string{"a": "a2", "c": "c2"}},
		{name: "differential to the last full", history: history, mode: "differential", wantMode: "differential",
			base: full, parent: incr, baseFull: full, since: map[string]string{"a": "a1", "b": "b1"}},
		{name: "differential without a full", history: broken, mode: "differential", wantMode: "full", parent: incr},
		{name: "incremental without a full", history: broken, mode: "incremental", wantMode: "incremental",
			base: incr, parent: incr, since: map[string]string{"a": "a2", "c": "c2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := backup.PlanVM(tc.history, vm, tc.mode)
			if p.Source != vm || p.Mode != tc.wantMode {
				t.Errorf("plan of %+v in %q: mode %q, want %q", p.Source, tc.mode, p.Mode, tc.wantMode)
			}
			for _, c := range []struct {
				what      string
				got, want *repo.Point
			}{{"base", p.Base, tc.base}, {"parent", p.Parent, tc.parent}, {"base full", p.BaseFull, tc.baseFull}} {
				if c.got != c.want {
					t.Errorf("%s: %s, want %s", c.what, describe(c.got), describe(c.want))
				}
			}
			since := p.Since()
			if !maps.Equal(since, tc.since) || (since == nil) != (tc.base == nil) {
				t.Errorf("since %v, want %v", since, tc.since)
			}
			req := p.SnapshotRequest(hypervisor.SnapshotRequest{SessionID: "s", Chain: "c", Hold: true})
			if req.SessionID != "s" || req.Chain != "c" || !req.Hold || !req.Track ||
				req.Differential != (tc.wantMode == "differential") || !maps.Equal(req.Since, tc.since) {
				t.Errorf("snapshot request %+v", req)
			}
		})
	}
}

func describe(s *repo.Point) string {
	if s == nil {
		return "none"
	}
	return s.Mode + " point of " + s.Source.VMName + " at " + s.Time.Format(time.TimeOnly)
}
