package console

import (
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// The fleet's workers: the registry as list-workers gives it, an
// operator's drain, and a worker's credential revoked.

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

// revokeWorkerToken revokes a worker's credential (revoke-worker-token),
// named in the form: a worker need not be registered to hold one.
func (p *page) revokeWorkerToken() {
	name := strings.TrimSpace(p.form().Get("worker"))
	var r api.WorkerTokenRevoked
	if _, err := p.api.call("revoke-worker-token", map[string]string{"worker": name}, nil, nil, &r); err != nil {
		p.fail(err)
		return
	}
	msg := fmt.Sprintf("The credential of worker %s is revoked: %d of its sessions ended.", r.Worker, r.Sessions)
	if r.Expired {
		msg += " Its heartbeat is expired: the servers declare it lost and re-admit its running work."
	}
	p.done(msg, "/ui/workers")
}
