package configops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/configobj"
)

// The endpoints of the configuration objects: for every kind, its
// collection (GET lists, POST creates) and its objects (GET, PUT,
// DELETE), the routes docs/design/server.md ("Configuration objects")
// gives. A catalog object's version is its ETag; PUT and DELETE take it
// back in If-Match, and a stale one is refused (412).

// configPrivileges are the privileges that see and change each kind, and
// the ACL path of its collection (which creating requires).
var configPrivileges = map[configobj.Kind]kindPrivileges{
	configobj.Policy:              {auth.PolicyAudit, auth.PolicyModify, auth.PoliciesPath},
	configobj.Connection:          {auth.ConnAudit, auth.SysModify, auth.ConnectionsPath},
	configobj.Repository:          {auth.RepoAudit, auth.RepoModify, auth.RepositoriesPath},
	configobj.NotificationTarget:  {auth.SysAudit, auth.SysModify, auth.SystemPath + "/" + configobj.NotificationTarget.Plural()},
	configobj.NotificationMatcher: {auth.SysAudit, auth.SysModify, auth.SystemPath + "/" + configobj.NotificationMatcher.Plural()},
	// A library names a directory or devices of the server's host, as a
	// connection names a hypervisor: its configuration is Sys.Modify's;
	// what is on its tapes is seen with Repo.Audit, as a repository's.
	configobj.MediaLibrary: {auth.RepoAudit, auth.SysModify, auth.MediaPath},
	// The engine's settings bound and pace every backup of the system.
	configobj.Limits:          systemKind(configobj.Limits),
	configobj.LatencyControl:  systemKind(configobj.LatencyControl),
	configobj.ResourceGroup:   systemKind(configobj.ResourceGroup),
	configobj.StorageProvider: systemKind(configobj.StorageProvider),
	// The maintenance schedules run gc, verify, forget and copies of
	// every repository, as the system's upkeep.
	configobj.MaintenanceWindow:   systemKind(configobj.MaintenanceWindow),
	configobj.MaintenanceSchedule: systemKind(configobj.MaintenanceSchedule),
	// A replication writes standbys onto a DR host's directories, as a
	// connection reaches a hypervisor: the system's.
	configobj.Replication: systemKind(configobj.Replication),
	// A failover plan starts standbys on the DR host: the system's too.
	configobj.FailoverPlan: systemKind(configobj.FailoverPlan),
}

type kindPrivileges struct {
	see, change auth.Privilege
	collection  string
}

// systemKind are the privileges of a kind of the system's: seen with
// Sys.Audit, changed with Sys.Modify, below /system.
func systemKind(k configobj.Kind) kindPrivileges {
	return kindPrivileges{auth.SysAudit, auth.SysModify, auth.SystemPath + "/" + k.Plural()}
}

// configSummaries say what each verb does to a kind.
var configSummaries = map[string]string{
	"list":           "list the %s, with where each is defined",
	"get":            "a %s and its version (ETag)",
	configobj.Create: "create a %s",
	configobj.Update: "change a %s created through the API",
	configobj.Delete: "delete a %s created through the API that nothing uses",
}

// configOperations are the five operations of every kind.
func configOperations() []service.Operation {
	var out []service.Operation
	for _, k := range configobj.Kinds {
		p := configPrivileges[k]
		route := configRoute(k)
		object := p.collection + "/{name}"
		noun := strings.ReplaceAll(string(k), "-", " ")
		summary := func(verb string) string {
			if verb == "list" {
				return fmt.Sprintf(configSummaries[verb], strings.ReplaceAll(k.Plural(), "-", " "))
			}
			return fmt.Sprintf(configSummaries[verb], noun)
		}
		op := func(verb, method, httpMethod, path string, req []service.Requirement, ep service.Registrar) service.Operation {
			id := ConfigOperationID(verb, k)
			return service.Operation{ID: id, Method: method, Summary: summary(verb), HTTP: httpMethod, Path: path, Requires: req,
				AuditsItself: RecordsOwnAudit(id), Endpoint: ep, MaxBodyBytes: 256 * service.KiB, NoConsole: noConsole(verb, k)}
		}
		out = append(out,
			op("list", "ConfigObjects", service.Get, route, service.Lists(p.see, p.collection), service.Returns(ofKind(k, (Ops).ConfigObjects))),
			op("get", "ConfigObject", service.Get, route+"/{name}", service.Require(p.see, object), service.Answers(ofKind(k, (Ops).ConfigObject))),
			op(configobj.Create, "CreateConfigObject", service.Post, route, service.Require(p.change, p.collection), service.Answers(ofKind(k, (Ops).CreateConfigObject))),
			op(configobj.Update, "UpdateConfigObject", service.Put, route+"/{name}", service.Require(p.change, object), service.Answers(ofKind(k, (Ops).UpdateConfigObject))),
			op(configobj.Delete, "DeleteConfigObject", service.Delete, route+"/{name}", service.Require(p.change, object), service.Returns(ofKind(k, (Ops).DeleteConfigObject))))
	}
	return out
}

// configRoute is the route of a kind's collection: /policies,
// /notifications/targets, /media/libraries (beside the media's other
// routes).
func configRoute(k configobj.Kind) string {
	switch k {
	case configobj.NotificationTarget, configobj.NotificationMatcher:
		return "/notifications/" + strings.TrimPrefix(k.Plural(), "notification-")
	case configobj.MediaLibrary:
		return "/media/libraries"
	}
	return "/" + k.Plural()
}

// ConfigNameParam names a configuration object.
type ConfigNameParam = api.ConfigNameParam

// ConfigObjectAnswer is an object with its version as the ETag (none
// for the file's objects, which the API does not change).
type ConfigObjectAnswer struct {
	Body *api.ConfigObject
	ETag string `header:"ETag" doc:"the object's version, for If-Match (catalog objects only)"`
}

// ConfigObjectCreated is a created object: 201, where it is, its ETag.
type ConfigObjectCreated struct {
	Body     *api.ConfigObject
	ETag     string `header:"ETag" doc:"the object's version, for If-Match"`
	Location string `header:"Location" doc:"the object's path below /api/v1"`
}

func (*ConfigObjectCreated) Status() int { return http.StatusCreated }

func answerObject(o *api.ConfigObject) *ConfigObjectAnswer {
	a := &ConfigObjectAnswer{Body: o}
	if o.Source == string(configobj.FromCatalog) && o.Version > 0 {
		a.ETag = api.ObjectETag(o.Version)
	}
	return a
}

// ifVersion reads a change's If-Match; one it cannot read refuses the
// change, which is audited like every refusal of a change.
func (s Ops) ifVersion(ctx context.Context, verb string, k configobj.Kind, name string, ifMatch api.IfMatchParam) (int64, error) {
	v, err := ifMatch.Version()
	if err != nil {
		if actor := s.Actor(ctx); actor != nil {
			s.auditRefusal(ctx, actor, ConfigOperationID(verb, k), k.Path(name), err)
		}
	}
	return v, err
}

// ofKind binds a method on the objects of every kind to the operation
// of one kind, whose kind is its route's, not a parameter.
func ofKind[I, T any](k configobj.Kind, m func(Ops, context.Context, configobj.Kind, *I) (T, error)) func(Ops, context.Context, *I) (T, error) {
	return func(s Ops, ctx context.Context, in *I) (T, error) { return m(s, ctx, k, in) }
}

// Document is what an in-process call returns of the answer.
func (a *ConfigObjectAnswer) Document() (any, string) { return a.Body, "" }

// Document is what an in-process call returns of the answer.
func (c *ConfigObjectCreated) Document() (any, string) { return c.Body, "" }
