package job

import "context"

// pump delivers a subscription's queue to its reader. It alone reads the
// catalog for the subscription (its job's state and the lines the reader
// is missing), so a slow reader or a slow read never holds up the
// publishers.
func (s *Subscription) pump() {
	defer close(s.c)
	cursor := map[int64]int64{} // the last line delivered, per job
	state := map[int64]Record{} // the last state delivered, per job
	if s.id != 0 {
		j, err := s.m.cat.GetJob(s.ctx(), s.id)
		if err != nil {
			s.end(err)
			return
		}
		cursor[s.id], state[s.id] = s.after, j
		status := Event{Type: EventStatus, JobID: s.id, Job: j}
		if j.Status.Done() {
			// Ended already: its log, then its final state as the last
			// event, as for a job that ends while followed (a reader
			// such as the console stops at the final state).
			if s.fill(cursor, s.id, j.LogLines) && s.emit(status) {
				s.end(nil)
			}
			return
		}
		if !s.emit(status) || !s.fill(cursor, s.id, j.LogLines) {
			return
		}
	}
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		s.mu.Lock()
		queue := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, ev := range queue {
			switch ev.Type {
			case EventLog:
				last, known := cursor[ev.JobID]
				if known && ev.Line.Seq <= last {
					continue // already delivered (from the catalog)
				}
				if known && !s.fill(cursor, ev.JobID, ev.Line.Seq-1) {
					return
				}
				if !s.emit(ev) {
					return
				}
				cursor[ev.JobID] = ev.Line.Seq
			default:
				// The same state may come twice (this pump read it, then
				// the watcher): deliver changes only.
				prev, known := state[ev.JobID]
				if ev.Type = change(prev, known, ev.Job); ev.Type == "" {
					continue
				}
				state[ev.JobID] = ev.Job
				done := ev.Job.Status.Done()
				if done && s.id != 0 && !s.fill(cursor, ev.JobID, ev.Job.LogLines) {
					return
				}
				if !s.emit(ev) {
					return
				}
				if done {
					if s.id != 0 {
						s.end(nil)
						return
					}
					delete(cursor, ev.JobID)
					delete(state, ev.JobID)
				}
			}
		}
	}
}

// fill delivers the lines of a job after the cursor up to line upTo from
// the catalog: lines recorded before the subscription, or by another
// process between two lines this one published.
func (s *Subscription) fill(cursor map[int64]int64, id, upTo int64) bool {
	for cursor[id] < upTo {
		lines, err := s.m.cat.JobLog(s.ctx(), id, cursor[id], int(min(upTo-cursor[id], 1000)))
		if err != nil {
			s.end(err)
			return false
		}
		if len(lines) == 0 {
			return true
		}
		for _, l := range lines {
			if !s.emit(Event{Type: EventLog, JobID: id, Line: l}) {
				return false
			}
			cursor[id] = l.Seq
		}
	}
	return true
}

func (s *Subscription) emit(ev Event) bool {
	select {
	case s.c <- ev:
		return true
	case <-s.done:
		return false
	}
}

// ctx is the context of the subscription's reads: it ends with the
// subscription.
func (s *Subscription) ctx() context.Context { return s.rctx }
