package engine

import (
	"errors"
	"fmt"
	"sync"
)

// ErrInterrupted is the cause of a policy run stopped by Interrupt: its
// record says "interrupted", as that of a run whose process died, so
// that whoever resumes those (a fleet's next leader) resumes it too.
var ErrInterrupted = errors.New("interrupted")

// liveJobs are the jobs an engine runs now.
type liveJobs struct {
	mu   sync.Mutex
	jobs map[*Job]struct{}
}

// track adds j until the returned function is called.
func (l *liveJobs) track(j *Job) (untrack func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.jobs == nil {
		l.jobs = map[*Job]struct{}{}
	}
	l.jobs[j] = struct{}{}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.jobs, j)
	}
}

// Interrupt stops every policy run of the engine that has not ended, as
// Cancel does, with cause ErrInterrupted (why says what interrupted
// them): each is recorded failed, "interrupted: why", its VMs not backed
// up left for whoever resumes interrupted runs. A backup of one VM
// (StartVM) goes on: its caller waits for it, and a forwarded one is
// forwarded again by its forwarder. It returns the runs it stopped.
func (e *Engine) Interrupt(why string) []int64 {
	cause := fmt.Errorf("%w: %s", ErrInterrupted, why)
	e.live.mu.Lock()
	var stopped []*Job
	for j := range e.live.jobs {
		if j.one == nil {
			stopped = append(stopped, j)
		}
	}
	e.live.mu.Unlock()
	ids := make([]int64, len(stopped))
	for i, j := range stopped {
		j.cancel(cause)
		ids[i] = j.ID()
	}
	return ids
}
