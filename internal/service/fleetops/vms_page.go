package fleetops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
)

// The VM inventory as pages: who sees which VMs and connections.

// vmsPageSize is the size of a page of VMs unless the request says.
const vmsPageSize = 100

// VMsPage is a page of the inventory: its VMs, how old each connection's
// inventory is, and the error that came with it.
type VMsPage struct {
	Body       *api.Inventory
	Next       string `header:"Coffer-Next" doc:"present when more VMs may follow: pass it as the after parameter for the next page"`
	ErrorClass string `header:"Coffer-Error-Class" doc:"partial when some connection's inventory is missing or its last refresh failed (errors says which)"`
	Error      string `header:"Coffer-Error" doc:"The message of that error, percent-encoded UTF-8."`
}

func (r *VMsPage) SetError(err error) {
	r.ErrorClass, r.Error = string(service.Classify(err)), api.EscapeHeader(err.Error())
}

// sees is whether the caller may see a VM of the inventory.
func sees(ctx context.Context, s Ops) func(connection, vm string) bool {
	actor := s.Actor(ctx)
	return func(connection, vm string) bool {
		return auth.Allowed(actor, auth.VMPath(connection, vm), auth.ConnAudit)
	}
}

// seenConnections keeps the states and errors of the connections the
// caller sees something of; err, the inventory's partial error, is
// dropped when none of those connections failed.
func seenConnections(ctx context.Context, s Ops, states []api.InventoryState, errs []api.ConnectionError,
	err error) ([]api.InventoryState, []api.ConnectionError, error) {
	actor := s.Actor(ctx)
	seen := func(conn string) bool { return auth.AllowedBelow(actor, auth.ConnectionPath(conn), auth.ConnAudit) }
	keptErrs := []api.ConnectionError{}
	for _, e := range errs {
		if seen(e.Connection) {
			keptErrs = append(keptErrs, e)
		}
	}
	keptStates := []api.InventoryState{}
	for _, st := range states {
		if seen(st.Connection) {
			keptStates = append(keptStates, st)
		}
	}
	if len(keptErrs) == 0 {
		err = nil // the caller sees no connection whose inventory failed
	}
	return keptStates, keptErrs, err
}

// Document is what an in-process call returns of the answer.
func (p *VMsPage) Document() (any, string) { return p.Body, p.Next }
