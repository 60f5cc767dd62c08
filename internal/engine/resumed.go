package engine

import (
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
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
// the same VM's task of each run it resumes (a policy run's one; a
// backup of one VM forwarded again, every job a lost leader ran it as),
// and returns the point of the first that has one, and its job ("": back
// the VM up). An error is transient: the attempt is retried, and nothing
// is backed up until every one is settled; one settled already is not
// asked again, and a point it gave is kept.
func (t *task) supersede() (pointID string, from int64, err error) {
	j := t.j
	for _, old := range j.resumes[t.superseded:] {
		msg := fmt.Sprintf("interrupted: job %d carries the run on", j.record.ID)
		p, err := j.e.o.Catalog.SupersedeTask(j.ctx, old, t.rec.Connection, t.rec.VMID, msg)
		if err != nil {
			return "", 0, fmt.Errorf("%w: %s's task of job %d, which this run resumes, could not be settled: %w",
				hypervisor.ErrTransient, t.vm.Name, old, err)
		}
		t.superseded++
		if p != "" && t.adoptable == "" {
			t.adoptable, t.adoptFrom = p, old
		}
	}
	return t.adoptable, t.adoptFrom, nil
}

// adopt ends the task with the point its VM's unit of job from (a run
// this one resumes) committed: a success of this run, with nothing
// backed up again. A backup of one VM reads the point back, for
// Job.Point to answer with it: a read that fails is transient (retried,
// the point kept).
func (t *task) adopt(pointID string, from int64) error {
	j := t.j
	var snap *repo.Point
	if j.one != nil {
		var err error
		if snap, err = j.loadPoint(j.ctx, pointID); err != nil {
			return fmt.Errorf("%w: point %s, which job %d made of %s, cannot be read: %w", hypervisor.ErrTransient, pointID, from, t.vm.Name, err)
		}
	}
	t.closeHeld(false) // a group's snapshot of the VM, not read
	j.mu.Lock()
	t.rec.Status, t.rec.FinishedAt, t.rec.Error, t.rec.BackupPointID = catalog.StatusSuccess, time.Now(), "", pointID
	t.rec.Attempts, t.prog, t.snap = 0, nil, snap
	rec := t.rec
	j.mu.Unlock()
	j.rec.task(rec)
	t.event("info", "task-done", fmt.Sprintf("%s backed up by job %d (point %s), whose unit ended after this run resumed it: not backed up again",
		t.vm.Name, from, pointID), map[string]any{"adopted_from_job": from, "point": pointID})
	j.pending.Done()
	return nil
}

// settleBatch is supersede for the VMs of a batch (group: datastore),
// before its first snapshot: a VM whose task in a run this one resumes
// committed a point takes it and leaves the batch, one that cannot be
// settled is retried VM by VM (failOrRetry), and the others are
// returned, to be read in the batch. Every VM read here thus has its old
// task ended, so that no unit of the interrupted run commits a point
// beside the batch's.
func (j *Job) settleBatch(batch []*task) []*task {
	if len(j.resumes) == 0 {
		return batch
	}
	var keep []*task
	for _, t := range batch {
		pointID, from, err := t.supersede()
		if err == nil && pointID != "" {
			err = t.adopt(pointID, from)
			if err == nil {
				continue
			}
		}
		if err != nil {
			t.failOrRetry(err)
			continue
		}
		keep = append(keep, t)
	}
	return keep
}
