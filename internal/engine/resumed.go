package engine

import (
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// A run that carries on an interrupted one (StartResuming) was narrowed
// to the VMs without a point when it started; a unit the dead leader
// handed to a worker may still commit its VM's point after that (the
// worker ends the unit in the catalog itself). The new leader holds such
// a unit until it ends (Engine.Hold), so the VM's first attempt here
// starts after it, and supersede settles the race in the catalog: the
// old task is ended there unless it succeeded, in the transaction that
// reads its point, and a unit ending later finds its task no longer
// running and is fenced (docs/design/fleet.md, "Runs that lose their
// leader").

// supersede settles, before the task's first attempt in a resumed run,
// the same VM's task of the run it resumes, and returns that task's
// point if it has one ("": back the VM up). An error is transient: the
// attempt is retried, and nothing is backed up until it is settled.
func (t *task) supersede() (string, error) {
	j := t.j
	if j.resumes == 0 || t.superseded {
		return "", nil
	}
	msg := fmt.Sprintf("interrupted: job %d carries the run on", j.record.ID)
	pointID, err := j.e.o.Catalog.SupersedeTask(j.ctx, j.resumes, t.rec.Connection, t.rec.VMID, msg)
	if err != nil {
		return "", fmt.Errorf("%w: %s's task of job %d, which this run resumes, could not be settled: %w",
			hypervisor.ErrTransient, t.vm.Name, j.resumes, err)
	}
	t.superseded = true
	return pointID, nil
}

// adopt ends the task with the point its VM's unit of the resumed run
// committed: a success of this run, with nothing backed up again.
func (t *task) adopt(pointID string) {
	j := t.j
	t.closeHeld(false) // a group's snapshot of the VM, not read
	j.mu.Lock()
	t.rec.Status, t.rec.FinishedAt, t.rec.Error, t.rec.BackupPointID = catalog.StatusSuccess, time.Now(), "", pointID
	t.rec.Attempts, t.prog = 0, nil
	rec := t.rec
	j.mu.Unlock()
	j.rec.task(rec)
	t.event("info", "task-done", fmt.Sprintf("%s backed up by job %d (point %s), whose unit ended after this run resumed it: not backed up again",
		t.vm.Name, j.resumes, pointID), map[string]any{"adopted_from_job": j.resumes, "point": pointID})
	j.pending.Done()
}
