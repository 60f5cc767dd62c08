package backup

import (
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Plan is what a VM's backup is relative to, decided from the
// repository's history before anything is snapshotted (PlanVM): the
// snapshot asks the hypervisor for the changes since Base (SnapshotRequest),
// and the read (RunVM) reuses the chunk IDs of Base, or of Parent, for
// what did not change.
type Plan struct {
	Source repo.Source
	// Mode is "full", "incremental" or "differential"; full whenever
	// there is no base to be relative to.
	Mode string
	// Parent is the source's newest point (nil: none), the point the new
	// one follows whatever its mode.
	Parent *repo.Point
	// BaseFull is the source's newest full point (nil: none).
	BaseFull *repo.Point
	// Base is the point the change sets are relative to: Parent for an
	// incremental backup, BaseFull for a differential one, nil for a
	// full one.
	Base *repo.Point
}

// PlanVM decides a backup of src in mode ("" is incremental) from the
// repository's points (history). The first backup of a source, and a
// differential one with no full point to be relative to, is full.
func PlanVM(history []*repo.Point, src repo.Source, mode string) Plan {
	p := Plan{Source: src, Mode: mode,
		Parent:   Latest(history, src, nil),
		BaseFull: Latest(history, src, func(s *repo.Point) bool { return s.Mode == "full" })}
	if p.Mode == "" {
		p.Mode = "incremental"
	}
	// The change set is relative to "base"; unchanged spans reuse its IDs.
	p.Base = p.Parent
	if p.Mode == "differential" {
		p.Base = p.BaseFull
	}
	if p.Mode == "full" || p.Base == nil {
		p.Mode, p.Base = "full", nil
	}
	return p
}

// Since is the change token of every disk of the base that has one, by
// disk key: what the hypervisor reports changes since. Nil for a full
// backup; a disk missing from it (added since, or its tracking distrusted)
// is read in full.
func (p Plan) Since() map[string]string {
	if p.Base == nil {
		return nil
	}
	since := map[string]string{}
	for _, d := range p.Base.Disks {
		if d.ChangeToken != "" {
			since[d.Key] = d.ChangeToken
		}
	}
	return since
}

// SnapshotRequest is req asking for the plan's change sets: since the
// base's tokens, differential or not, and with change tracking on so the
// next backup can be relative to this one.
func (p Plan) SnapshotRequest(req hypervisor.SnapshotRequest) hypervisor.SnapshotRequest {
	req.Since, req.Differential, req.Track = p.Since(), p.Mode == "differential", true
	return req
}
