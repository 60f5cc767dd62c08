package engine

import (
	"sort"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Progress is a snapshot of a running job, for live displays.
type Progress struct {
	JobID                      int64
	Policy                     string
	Elapsed                    time.Duration
	VMs, Done, Failed, Running int
	BytesTotal, BytesDone      int64 // estimated from provisioned sizes
	RunningVMs                 []VMProgress
	ETA                        time.Duration // 0 when unknown
}

// VMProgress is one running VM.
type VMProgress struct {
	VM                    string
	Attempt               int
	BytesDone, BytesTotal int64
	Elapsed               time.Duration
}

// Progress returns the job's current progress. Finished VMs count with
// their full estimated size, so the byte counts stay consistent while the
// estimate is refined by what running VMs report.
func (j *Job) Progress() Progress {
	j.mu.Lock()
	defer j.mu.Unlock()
	p := Progress{JobID: j.record.ID, Policy: j.p.Name, Elapsed: time.Since(j.record.StartedAt), VMs: len(j.tasks)}
	for _, t := range j.tasks {
		p.BytesTotal += t.size
		switch t.rec.Status {
		case catalog.StatusSuccess:
			p.Done++
			p.BytesDone += t.size
		case catalog.StatusFailed, catalog.StatusCancelled:
			p.Failed++
			p.BytesDone += t.size
		case catalog.StatusRunning:
			p.Running++
			v := VMProgress{VM: t.vm.Name, Attempt: t.attempt, BytesTotal: t.size, Elapsed: time.Since(t.rec.StartedAt)}
			if t.prog != nil {
				if n := t.prog.BytesTotal.Load(); n > 0 {
					v.BytesTotal = n
				}
				v.BytesDone = min(t.prog.BytesDone.Load(), v.BytesTotal)
			}
			p.BytesDone += min(v.BytesDone, t.size)
			p.RunningVMs = append(p.RunningVMs, v)
		}
	}
	sort.Slice(p.RunningVMs, func(a, b int) bool { return p.RunningVMs[a].VM < p.RunningVMs[b].VM })
	if p.BytesDone > 0 && p.BytesDone < p.BytesTotal {
		p.ETA = time.Duration(float64(p.Elapsed) * float64(p.BytesTotal-p.BytesDone) / float64(p.BytesDone))
	}
	return p
}

// Tasks returns a copy of every task record as it is now.
func (j *Job) Tasks() []catalog.Task {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]catalog.Task, len(j.tasks))
	for i, t := range j.tasks {
		out[i] = t.rec
	}
	return out
}

// sample is the progress as the job's task records it: bytes, the
// average rate so far, the ETA, and VMs done (or failed) of all.
func (p Progress) sample() catalog.Progress {
	s := catalog.Progress{BytesDone: p.BytesDone, BytesTotal: p.BytesTotal, ETA: p.ETA,
		ItemsDone: int64(p.Done + p.Failed), ItemsTotal: int64(p.VMs)}
	if secs := p.Elapsed.Seconds(); secs > 0 {
		s.BytesPerSecond = float64(p.BytesDone) / secs
	}
	return s
}
