package job

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Cancel asks a queued or running job to stop, on behalf of by (a user
// name, for its log). The request is a flag in the catalog, so it reaches
// the job wherever it runs: at once when it runs in this process, within
// a notice (PostgreSQL) or a poll (SQLite) in another. A job whose
// process is gone is marked cancelled here and now. Cancelling a finished
// job is an error wrapping ErrFinished, returned with the job.
func (m *Manager) Cancel(ctx context.Context, id int64, by string) (Record, error) {
	msg := "cancel requested"
	if by != "" {
		msg += " by " + by
	}
	j, err := m.cat.RequestCancel(ctx, id, msg)
	if errors.Is(err, catalog.ErrFinished) {
		return j, fmt.Errorf("task %d has already finished (%s): nothing to cancel: %w", id, j.Status, ErrFinished)
	}
	if err != nil {
		return Record{}, err
	}
	if h := m.handle(id); h != nil {
		// Its subscribers get the line now; its handle's next lines
		// follow it.
		m.hub.publishLines(id, []Line{{Time: j.CancelRequested, JobID: id, Seq: j.LogLines, Level: "warn", Kind: "cancel", Message: msg}})
		h.cancelRequested(j.CancelRequested)
		return h.Job(), nil
	}
	if gone, why := m.ownerGone(j, m.o.Now()); gone {
		if _, err := m.cat.AbandonJob(ctx, id, j.Heartbeat, catalog.StatusCancelled, msg+"; "+why); err != nil {
			return j, err
		}
		return m.cat.GetJob(ctx, id)
	}
	return j, nil
}

// ownerGone reports whether the process running a job is gone, and why.
// On this host the process table answers at once, however long since its
// last heartbeat (a live process is trusted to finish or die); the job
// of another host is judged by its heartbeat, like a lease by its expiry.
func (m *Manager) ownerGone(j Record, now time.Time) (bool, string) {
	o := j.Owner
	if o.Host == m.owner.Host && o.PID > 0 {
		// The same test as repository leases (repo.LeaseInfo.Dead): the
		// PID runs no process, or one started at another time.
		start, err := repo.ProcessStart(o.PID)
		if err == nil && (o.Start == 0 || start == o.Start) {
			return false, ""
		}
		return true, fmt.Sprintf("the coffer process that ran it (pid %d on %s) is gone", o.PID, o.Host)
	}
	last := j.Heartbeat
	if last.IsZero() { // recorded before owners were: its start is all there is
		last = j.CreatedAt
		if j.StartedAt.After(last) {
			last = j.StartedAt
		}
	}
	if now.Sub(last) <= m.o.StaleAfter {
		return false, ""
	}
	who := "the process that ran it"
	if o.Host != "" {
		who = fmt.Sprintf("the coffer process that ran it (pid %d on %s)", o.PID, o.Host)
	}
	return true, fmt.Sprintf("%s showed no sign of life since %s", who, last.Local().Format(time.DateTime))
}

// Recover marks every queued or running job whose process is gone as
// failed, "interrupted", and returns how many it marked. New runs it, and
// the Manager again every StaleAfter/2; several processes may race to mark
// a job, and one does.
func (m *Manager) Recover(ctx context.Context) (int, error) {
	jobs, err := m.cat.ListJobs(ctx, catalog.JobFilter{Unfinished: true})
	if err != nil {
		return 0, fmt.Errorf("find interrupted tasks: %w", err)
	}
	now, n := m.o.Now(), 0
	for _, j := range jobs {
		if m.handle(j.ID) != nil {
			continue
		}
		gone, why := m.ownerGone(j, now)
		if !gone {
			continue
		}
		done, err := m.cat.AbandonJob(ctx, j.ID, j.Heartbeat, catalog.StatusFailed, "interrupted: "+why)
		if err != nil {
			return n, fmt.Errorf("mark task %d interrupted: %w", j.ID, err)
		}
		if done {
			n++
			m.log.Warn("task interrupted", "task", j.ID, "kind", j.Kind, "reason", why)
		}
	}
	return n, nil
}

// Prune deletes the finished jobs older than Options.Retention with their
// logs, a batch (Options.PruneBatch rows) per transaction so that other
// writers are never held up for long, and returns the rows deleted.
func (m *Manager) Prune(ctx context.Context) (int, error) {
	if m.o.Retention < 0 {
		return 0, nil
	}
	before, total := m.o.Now().Add(-m.o.Retention), 0
	for ctx.Err() == nil {
		n, err := m.cat.PruneHistory(ctx, before, m.o.PruneBatch)
		total += n
		if err != nil || n == 0 {
			if total > 0 {
				m.log.Info("pruned task history", "rows", total, "finished before", before)
			}
			return total, err
		}
	}
	return total, ctx.Err()
}

// maintain runs Recover every StaleAfter/2 and Prune every PruneEvery
// (first at once) until Close.
func (m *Manager) maintain() {
	sweep := time.NewTicker(m.o.StaleAfter / 2)
	defer sweep.Stop()
	var prune <-chan time.Time
	if m.o.PruneEvery > 0 && m.o.Retention >= 0 {
		t := time.NewTicker(m.o.PruneEvery)
		defer t.Stop()
		prune = t.C
		if _, err := m.Prune(m.ctx); err != nil && m.ctx.Err() == nil {
			m.log.Warn("pruning task history failed", "err", err)
		}
	}
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-sweep.C:
			if _, err := m.Recover(m.ctx); err != nil && m.ctx.Err() == nil {
				m.log.Warn("looking for interrupted tasks failed", "err", err)
			}
		case <-prune:
			if _, err := m.Prune(m.ctx); err != nil && m.ctx.Err() == nil {
				m.log.Warn("pruning task history failed", "err", err)
			}
		}
	}
}
