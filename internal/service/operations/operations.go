// Package operations composes the operation table out of the domains'
// (internal/service/*ops): every face reads the whole table here, and a
// service runs operations by ID from it (service.Config.Operations).
// The kernel cannot hold it, since the domains import the kernel.
package operations

import (
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/accessops"
	"github.com/coffer-backup/coffer/internal/service/backupops"
	"github.com/coffer-backup/coffer/internal/service/bootops"
	"github.com/coffer-backup/coffer/internal/service/configops"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
	"github.com/coffer-backup/coffer/internal/service/jobops"
	"github.com/coffer-backup/coffer/internal/service/mediaops"
	"github.com/coffer-backup/coffer/internal/service/planops"
	"github.com/coffer-backup/coffer/internal/service/replicaops"
	"github.com/coffer-backup/coffer/internal/service/repoops"
	"github.com/coffer-backup/coffer/internal/service/restoreops"
	"github.com/coffer-backup/coffer/internal/service/upgradeops"
	"github.com/coffer-backup/coffer/internal/service/workerops"
)

// All is every operation of every domain.
var All = concat(
	repoops.Operations,
	backupops.Operations,
	restoreops.Operations,
	bootops.Operations,
	mediaops.Operations,
	jobops.Operations,
	fleetops.Operations,
	workerops.Operations,
	planops.Operations,
	configops.Operations,
	accessops.Operations,
	upgradeops.Operations,
	replicaops.Operations,
)

func concat(tables ...[]service.Operation) []service.Operation {
	var all []service.Operation
	for _, t := range tables {
		all = append(all, t...)
	}
	return all
}

// New is a service that runs every operation (service.New with
// Config.Operations set to All), the engine predicting each run with the
// planner (planops.Predictor).
func New(cfg service.Config) *service.Service {
	cfg.Operations = All
	cfg.Predictor = planops.Predictor
	return service.New(cfg)
}

// ByID is the operation with that ID, nil if there is none.
func ByID(id string) *service.Operation { return service.OperationByID(All, id) }
