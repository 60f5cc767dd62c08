package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/configobj"
)

// The endpoints of the configuration objects: for every kind, its
// collection (GET lists, POST creates) and its objects (GET, PUT,
// DELETE), the routes docs/design/server.md ("Configuration objects")
// gives. A catalog object's version is its ETag; PUT and DELETE take it
// back in If-Match, and a stale one is refused (412).

// configPrivileges are the privileges that see and change each kind, and
// the ACL path of its collection (which creating requires).
var configPrivileges = map[configobj.Kind]struct {
	see, change auth.Privilege
	collection  string
}{
	configobj.Policy:              {auth.PolicyAudit, auth.PolicyModify, auth.PoliciesPath},
	configobj.Connection:          {auth.ConnAudit, auth.SysModify, auth.ConnectionsPath},
	configobj.Repository:          {auth.RepoAudit, auth.RepoModify, auth.RepositoriesPath},
	configobj.NotificationTarget:  {auth.SysAudit, auth.SysModify, auth.SystemPath + "/" + configobj.NotificationTarget.Plural()},
	configobj.NotificationMatcher: {auth.SysAudit, auth.SysModify, auth.SystemPath + "/" + configobj.NotificationMatcher.Plural()},
	// A library names a directory or devices of the server's host, as a
	// connection names a hypervisor: its configuration is Sys.Modify's;
	// what is on its tapes is seen with Repo.Audit, as a repository's.
	configobj.MediaLibrary: {auth.RepoAudit, auth.SysModify, auth.MediaPath},
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
func configOperations() []Operation {
	var out []Operation
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
		op := func(verb, method, httpMethod, path string, req []Requirement, ep Registrar) Operation {
			id := ConfigOperationID(verb, k)
			return Operation{ID: id, Method: method, Summary: summary(verb), HTTP: httpMethod, Path: path, Requires: req,
				AuditsItself: RecordsOwnAudit(id), Endpoint: ep, MaxBodyBytes: 256 * KiB}
		}
		out = append(out,
			op("list", "ConfigObjects", Get, route, Lists(p.see, p.collection), Returns(ofKind(k, (*Service).ConfigObjects))),
			op("get", "ConfigObject", Get, route+"/{name}", Require(p.see, object), Answers(ofKind(k, (*Service).ConfigObject))),
			op(configobj.Create, "CreateConfigObject", Post, route, Require(p.change, p.collection), Answers(ofKind(k, (*Service).CreateConfigObject))),
			op(configobj.Update, "UpdateConfigObject", Put, route+"/{name}", Require(p.change, object), Answers(ofKind(k, (*Service).UpdateConfigObject))),
			op(configobj.Delete, "DeleteConfigObject", Delete, route+"/{name}", Require(p.change, object), Returns(ofKind(k, (*Service).DeleteConfigObject))))
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

func (*ConfigObjectCreated) status() int { return http.StatusCreated }

func answerObject(o *api.ConfigObject) *ConfigObjectAnswer {
	a := &ConfigObjectAnswer{Body: o}
	if o.Source == string(configobj.FromCatalog) && o.Version > 0 {
		a.ETag = api.ObjectETag(o.Version)
	}
	return a
}

// ifVersion reads a change's If-Match; one it cannot read refuses the
// change, which is audited like every refusal of a change.
func (s *Service) ifVersion(ctx context.Context, verb string, k configobj.Kind, name string, ifMatch api.IfMatchParam) (int64, error) {
	v, err := ifMatch.Version()
	if err != nil {
		if actor := s.Actor(ctx); actor != nil {
			s.auditRefusal(ctx, actor, ConfigOperationID(verb, k), k.Path(name), err)
		}
	}
	return v, err
}

// Stale reports a change refused because the object changed since the
// version it was made on (the server answers 412 Precondition Failed).
func Stale(err error) bool { return errors.Is(err, catalog.ErrStale) }

// ofKind binds a method on the objects of every kind to the operation
// of one kind, whose kind is its route's, not a parameter.
func ofKind[I, T any](k configobj.Kind, m func(*Service, context.Context, configobj.Kind, *I) (T, error)) func(*Service, context.Context, *I) (T, error) {
	return func(s *Service, ctx context.Context, in *I) (T, error) { return m(s, ctx, k, in) }
}
