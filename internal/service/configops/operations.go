package configops

import (
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/configobj"
	"github.com/coffer-backup/coffer/internal/service"
)

// Operations are this domain's rows of the operation table: those below,
// then every verb on every kind of configuration object.
var Operations = append([]service.Operation{
	{ID: "get-effective-config", Method: "EffectiveConfig", Summary: "the configuration in effect: the file's objects and the API's, with the source of each",
		HTTP: service.Get, Path: "/config/effective", Requires: service.Require(auth.SysAudit, auth.SystemPath),
		Endpoint: service.Returns(Ops.EffectiveConfig)},

	// Notifications (their targets and matchers are configuration objects).
	{ID: "test-notification-target", Method: "TestNotification", Summary: "send a test message to a notification target now (nothing is recorded)",
		HTTP: service.Post, Path: "/notifications/targets/{name}/test",
		Requires: service.Require(auth.SysModify, auth.SystemPath+"/"+configobj.NotificationTarget.Plural()+"/{name}"),
		Endpoint: service.Returns(Ops.TestNotification)},
}, configOperations()...)
