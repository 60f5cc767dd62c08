package job

import (
	"maps"
	"slices"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// The watcher learns what other processes record: cancel requests for the
// jobs this process runs, and the changes and log lines of the jobs its
// subscribers follow that run elsewhere. On PostgreSQL it reads what the
// notices name (follow); on a catalog that cannot push changes it reads
// the followed jobs every PollInterval while anything is followed or
// running here, and sleeps otherwise (poll). One goroutine runs it, so the
// events of a job run elsewhere are published in order.

// watchState is the watcher's memory: the last state published of each
// job followed here and run elsewhere, the jobs whose end it published
// lately (a late notice must not publish them again), and the highest
// job ID seen (new jobs, for subscriptions to every job, when polling).
type watchState struct {
	seen    map[int64]Record
	ended   map[int64]time.Time
	maxSeen int64
	failing bool
}

func newWatchState() *watchState {
	return &watchState{seen: map[int64]Record{}, ended: map[int64]time.Time{}}
}

// endMemory is how long the end of a job is remembered: longer than any
// notice of it takes to arrive.
const endMemory = 10 * time.Minute

// over reports whether the end of job id was published here (by the
// watcher, or by this process's handle), and forgets old ends.
func (m *Manager) over(w *watchState, id int64) bool {
	now := time.Now()
	for k, t := range w.ended {
		if now.Sub(t) > endMemory {
			delete(w.ended, k)
		}
	}
	_, ended := w.ended[id]
	return ended || m.endedHere(id)
}

// poll follows other processes by reading the catalog.
func (m *Manager) poll() {
	w := newWatchState()
	t := time.NewTimer(m.o.PollInterval)
	defer t.Stop()
	for {
		if !m.following() {
			select {
			case <-m.ctx.Done():
				return
			case <-m.wake:
			}
			continue
		}
		t.Reset(m.o.PollInterval)
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		m.refresh(w)
	}
}

// following reports whether anything needs the watcher: a job running
// here (its cancel flag) or a subscriber.
func (m *Manager) following() bool {
	m.mu.Lock()
	running := len(m.owned) > 0
	m.mu.Unlock()
	ids, all := m.hub.followed()
	return running || all || len(ids) > 0
}

func (m *Manager) ownedIDs() []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Keys(m.owned))
}

// refresh reads every job the watcher follows and observes it.
func (m *Manager) refresh(w *watchState) {
	ids, all := m.hub.followed()
	var jobs []Record
	var err error
	list := func(f catalog.JobFilter) {
		if err == nil {
			var js []Record
			js, err = m.cat.ListJobs(m.ctx, f)
			jobs = append(jobs, js...)
		}
	}
	if all {
		if w.maxSeen == 0 {
			list(catalog.JobFilter{Limit: 20})
			for _, j := range jobs {
				w.maxSeen = max(w.maxSeen, j.ID)
			}
			jobs = nil
		}
		list(catalog.JobFilter{Unfinished: true})
		list(catalog.JobFilter{AboveID: w.maxSeen})
	}
	got := map[int64]bool{}
	for _, j := range jobs {
		got[j.ID] = true
	}
	want := map[int64]bool{}
	for _, id := range slices.Concat(ids, m.ownedIDs(), slices.Collect(maps.Keys(w.seen))) {
		if !got[id] {
			want[id] = true
		}
	}
	if len(want) > 0 {
		list(catalog.JobFilter{IDs: slices.Collect(maps.Keys(want))})
	}
	if m.watchFailed(w, err) {
		return
	}
	observed := map[int64]bool{}
	for _, j := range jobs {
		if !observed[j.ID] {
			observed[j.ID] = true
			m.observe(w, j)
		}
	}
	for id := range w.seen {
		if !observed[id] {
			delete(w.seen, id)
		}
	}
}

// watchFailed logs the first of a series of failed reads.
func (m *Manager) watchFailed(w *watchState, err error) bool {
	if err != nil && m.ctx.Err() == nil && !w.failing {
		m.log.Warn("reading task changes of other processes failed; will retry", "err", err)
	}
	w.failing = err != nil
	return err != nil
}

// follow follows other processes through the catalog's notices, and
// those of lines while a subscription wants them (lineListener).
func (m *Manager) follow(notices <-chan catalog.JobNotice) {
	w := newWatchState()
	lines := m.newLineListener()
	defer lines.stop()
	for {
		var batch []catalog.JobNotice
		select {
		case <-m.ctx.Done():
			return
		case n, ok := <-notices:
			if !ok {
				return
			}
			batch = append(batch, n)
		case n, ok := <-lines.C:
			if !ok {
				lines.stop() // listening again at the next wake, if wanted
				continue
			}
			lines.on.Store(true)
			batch = append(batch, n)
		case <-m.wake:
			lines.update(false)
			continue
		case <-lines.idleC():
			lines.update(true)
			continue
		}
		// Read each job once for all its notices waiting now.
		var open bool
		if batch, open = drain(batch, notices, lines); !open {
			return
		}
		m.handleNotices(w, batch)
	}
}

// drain adds the notices waiting now to batch; false when notices closed.
func drain(batch []catalog.JobNotice, notices <-chan catalog.JobNotice, lines *lineListener) ([]catalog.JobNotice, bool) {
	for {
		select {
		case n, ok := <-notices:
			if !ok {
				return batch, false
			}
			batch = append(batch, n)
		case n, ok := <-lines.C:
			if !ok {
				return batch, true // follow sees it closed next
			}
			lines.on.Store(true)
			batch = append(batch, n)
		default:
			return batch, true
		}
	}
}

// handleNotices reads the jobs a batch of notices names, each once.
func (m *Manager) handleNotices(w *watchState, batch []catalog.JobNotice) {
	for _, n := range batch {
		if catalog.LineNotice(n.What) {
			m.heard.lines.Add(1)
		} else {
			m.heard.others.Add(1)
		}
	}
	var order []int64
	cancels, resync := map[int64]bool{}, false
	for _, n := range batch {
		if n.What == catalog.NoticeResync {
			resync = true
			continue
		}
		if _, dup := cancels[n.JobID]; !dup {
			order = append(order, n.JobID)
		}
		cancels[n.JobID] = cancels[n.JobID] || n.What == catalog.NoticeCancel
	}
	if resync {
		m.refresh(w)
		return
	}
	for _, id := range order {
		if h := m.handle(id); h != nil && !cancels[id] {
			continue // its own handle published it
		}
		if m.handle(id) == nil && !m.hub.interested(id) {
			continue
		}
		j, err := m.cat.GetJob(m.ctx, id)
		if m.watchFailed(w, err) {
			continue
		}
		m.observe(w, j)
	}
}

// observe handles the current state of a job read from the catalog.
func (m *Manager) observe(w *watchState, j Record) {
	w.maxSeen = max(w.maxSeen, j.ID)
	if h := m.handle(j.ID); h != nil {
		delete(w.seen, j.ID) // its handle publishes it
		if !j.CancelRequested.IsZero() {
			h.cancelRequested(j.CancelRequested)
		}
		return
	}
	if !m.hub.interested(j.ID) || m.over(w, j.ID) {
		delete(w.seen, j.ID)
		return
	}
	// A job's new state comes before its new lines, except its final
	// status, which follows its last line.
	prev, known := w.seen[j.ID]
	w.seen[j.ID] = j
	typ := change(prev, known, j)
	if typ != "" && !j.Status.Done() {
		m.hub.publishState(j, typ)
	}
	last := m.hub.lastSeq(j.ID, func() int64 {
		if since := m.hub.since(); !since.IsZero() && !j.CreatedAt.Before(since) {
			return 0 // a new job: its whole log
		}
		return j.LogLines
	})
	for last < j.LogLines {
		lines, err := m.cat.JobLog(m.ctx, j.ID, last, 1000)
		if m.watchFailed(w, err) || len(lines) == 0 {
			break
		}
		m.hub.publishLines(j.ID, lines)
		last = lines[len(lines)-1].Seq
	}
	if j.Status.Done() {
		if typ != "" {
			m.hub.publishState(j, typ)
		}
		delete(w.seen, j.ID)
		w.ended[j.ID] = time.Now()
	}
}

// change is the event a new state of a job makes, "" when nothing a
// subscriber sees changed.
func change(prev Record, known bool, j Record) string {
	switch {
	case !known || prev.Status != j.Status || prev.Error != j.Error || !prev.CancelRequested.Equal(j.CancelRequested) ||
		!prev.StartedAt.Equal(j.StartedAt) || !prev.FinishedAt.Equal(j.FinishedAt) ||
		prev.TasksTotal != j.TasksTotal || prev.TasksOK != j.TasksOK || prev.TasksFail != j.TasksFail:
		return EventStatus
	case prev.Progress != j.Progress:
		return EventProgress
	}
	return ""
}
