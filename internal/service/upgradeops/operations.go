package upgradeops

import (
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/service"
)

// Operations are this domain's rows of the operation table.
var Operations = []service.Operation{
	{ID: "check-upgrade", Method: "CheckUpgrade",
		Summary: "what this coffer would change on its catalog, and what of other versions shares it: pending migrations, lease holders, repository formats, deprecated keys (changes nothing)",
		HTTP:    service.Get, Path: "/upgrade/check", Requires: service.Require(auth.SysAudit, auth.SystemPath),
		Endpoint: service.Returns(Ops.CheckUpgrade)},
}
