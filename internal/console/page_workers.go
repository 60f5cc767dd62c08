package console

import "github.com/coffer-backup/coffer/internal/api"

// The fleet's workers: the registry as list-workers gives it, and an
// operator's drain.

type workersView struct {
	Workers []api.Worker
}

// workers lists the workers: state, slots, reach, last heartbeat.
func (p *page) workers() {
	var v workersView
	if _, err := p.api.call("list-workers", nil, nil, nil, &v.Workers); err != nil {
		p.fail(err)
		return
	}
	p.show("workers", "Workers", "workers", v)
}

// drainWorker drains a worker and shows the list again, where it is now
// draining until its running work has finished and it deregisters.
func (p *page) drainWorker() {
	var w api.Worker
	if _, err := p.api.call("drain-worker", map[string]string{"worker": p.r.PathValue("worker")}, nil, nil, &w); err != nil {
		p.fail(err)
		return
	}
	p.redirect("/ui/workers")
}
