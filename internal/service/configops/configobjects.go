package configops

import (
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"

	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/configobj"
	mediaall "github.com/coffer-backup/coffer/internal/media/all"
)

// The configuration objects (policies, connections, repositories,
// notification targets and matchers, media libraries, and the engine's
// settings) are listed, created, changed and
// deleted here, whoever asks: the API's routes and `coffer config
// create/update/delete` call these methods. Objects created here are
// stored in the catalog and merged with the configuration file by
// internal/configobj (the file wins for the names it defines). Every
// change is checked with the file's decoders and validators against the
// whole configuration it would make, stored with a new version under the
// catalog's configuration lock, and audited in the same transaction;
// refused changes are audited too. So the server records no audit record
// of its own for these operations (RecordsOwnAudit).

// ConfigOperationID is the operation ID of a verb (list, get, create,
// update, delete) on a kind: "create-policy", "list-notification-targets".
// Audit records name changes by it; the server registers routes by it.
func ConfigOperationID(verb string, k configobj.Kind) string {
	if verb == "list" {
		return "list-" + k.Plural()
	}
	return verb + "-" + string(k)
}

// RecordsOwnAudit reports whether the operation writes its own audit
// records (in the transaction of its change), so that the server's
// middleware must not record it again.
func RecordsOwnAudit(id string) bool {
	for _, k := range configobj.Kinds {
		for _, verb := range []string{configobj.Create, configobj.Update, configobj.Delete} {
			if id == ConfigOperationID(verb, k) {
				return true
			}
		}
	}
	return false
}

// ConfigObjects lists the configuration objects of a kind in effect that
// the caller may see, each with where it is defined, then the catalog's
// objects of the kind the file overrides.
func (s Ops) ConfigObjects(ctx context.Context, k configobj.Kind, _ *api.ListConfigObjectsInput) ([]api.ConfigObject, error) {
	st, err := s.ReadConfig(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.ConfigObject{}
	for _, o := range st.Of(k) {
		out = append(out, objectDoc(o))
	}
	return service.Visible(ctx, s.Service, configPrivileges[k].see, out, func(o api.ConfigObject) []string { return []string{k.Path(o.Name)} }), nil
}

// ConfigObject returns one object in effect (the file's, when both
// define it), with its version as the ETag of a change.
func (s Ops) ConfigObject(ctx context.Context, k configobj.Kind, in *api.GetConfigObjectInput) (*ConfigObjectAnswer, error) {
	st, err := s.ReadConfig(ctx)
	if err != nil {
		return nil, err
	}
	o, ok := st.Lookup(k, in.Name)
	if !ok {
		return nil, api.Errorf(api.NotFound, "%w: no %s is named %q (`coffer config list %s` lists them)", catalog.ErrNotFound, k, in.Name, k.Plural())
	}
	doc := objectDoc(o)
	return answerObject(&doc), nil
}

// CreateConfigObject stores a new object (its spec in the configuration
// file's schema, with its name), checked like the file's.
func (s Ops) CreateConfigObject(ctx context.Context, k configobj.Kind, in *api.CreateConfigObjectInput) (*ConfigObjectCreated, error) {
	name, _ := in.Body[k.NameKey()].(string)
	o, err := s.changeConfig(ctx, configobj.Create, k, name, 0, func(st *configobj.State, k configobj.Kind) (*configobj.Plan, error) {
		return st.PlanCreate(k, in.Body, s.CheckConfig)
	})
	if err != nil {
		return nil, err
	}
	a := answerObject(o)
	return &ConfigObjectCreated{Body: a.Body, ETag: a.ETag, Location: configRoute(k) + "/" + url.PathEscape(o.Name)}, nil
}

// UpdateConfigObject replaces the spec of an object created through the
// API (the whole object: keys left out take their defaults), checked like
// the file's. If-Match, unless absent, must be the object's version (the
// ETag read with it), or the change is refused as a conflict.
func (s Ops) UpdateConfigObject(ctx context.Context, k configobj.Kind, in *api.UpdateConfigObjectInput) (*ConfigObjectAnswer, error) {
	v, err := s.ifVersion(ctx, configobj.Update, k, in.Name, in.IfMatchParam)
	if err != nil {
		return nil, err
	}
	o, err := s.changeConfig(ctx, configobj.Update, k, in.Name, v, func(st *configobj.State, k configobj.Kind) (*configobj.Plan, error) {
		return st.PlanUpdate(k, in.Name, in.Body, s.CheckConfig)
	})
	if err != nil {
		return nil, err
	}
	return answerObject(o), nil
}

// DeleteConfigObject deletes an object created through the API, at the
// version If-Match says (absent: whatever it is now), and returns it as
// it was. One that objects in effect use is refused, naming them. Jobs
// and backup points of a deleted policy or repository stay.
func (s Ops) DeleteConfigObject(ctx context.Context, k configobj.Kind, in *api.DeleteConfigObjectInput) (*api.ConfigObject, error) {
	v, err := s.ifVersion(ctx, configobj.Delete, k, in.Name, in.IfMatchParam)
	if err != nil {
		return nil, err
	}
	return s.changeConfig(ctx, configobj.Delete, k, in.Name, v, func(st *configobj.State, k configobj.Kind) (*configobj.Plan, error) {
		return st.PlanDelete(k, in.Name, s.CheckConfig)
	})
}

// EffectiveConfig is the configuration in effect, every object with its
// source, and its problems.
func (s Ops) EffectiveConfig(ctx context.Context, _ *api.GetEffectiveConfigInput) (*api.EffectiveConfig, error) {
	st, err := s.ReadConfig(ctx)
	if err != nil {
		return nil, err
	}
	doc := &api.EffectiveConfig{File: st.File.Path, Generation: st.Generation, Objects: []api.ConfigObject{},
		Overridden: []api.ConfigObject{}, Problems: []string{}}
	for _, o := range st.Objects {
		doc.Objects = append(doc.Objects, objectDoc(o))
	}
	for _, o := range st.Overridden {
		doc.Overridden = append(doc.Overridden, objectDoc(o))
	}
	errs, _ := service.EngineProblems(st.Engine, true)
	doc.Problems = append(doc.Problems, configobj.Problems(errors.Join(append(errs, st.Notify.Validate())...))...)
	return doc, nil
}

// changeConfig plans a change against the configuration in effect and
// stores it with its audit record, all in one transaction under the
// catalog's configuration lock, so two changes never both pass their
// checks on the same state. A refused change is audited after.
func (s Ops) changeConfig(ctx context.Context, verb string, k configobj.Kind, name string, ifVersion int64,
	plan func(*configobj.State, configobj.Kind) (*configobj.Plan, error)) (*api.ConfigObject, error) {
	opID, object := ConfigOperationID(verb, k), k.Path(name)
	actor := auth.SubjectFrom(ctx)
	if actor == nil {
		// Every change records who made it: a face that calls without a
		// subject is a bug (the command line acts as auth.Local()).
		return nil, api.Errorf(api.Unauthenticated, "%s: no user to record the change under", opID)
	}
	out, err := s.storeChange(ctx, actor, opID, object, k, name, ifVersion, plan)
	if err != nil {
		err = configError(err)
		s.auditRefusal(ctx, actor, opID, object, err)
		return nil, err
	}
	s.ConfigChanged()
	doc := objectDoc(out)
	return &doc, nil
}

func (s Ops) storeChange(ctx context.Context, actor *auth.Subject, opID, object string, k configobj.Kind, name string, ifVersion int64,
	plan func(*configobj.State, configobj.Kind) (*configobj.Plan, error)) (configobj.Object, error) {
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return configobj.Object{}, err
	}
	defer cat.Close()
	var out configobj.Object
	err = cat.UpdateConfig(ctx, func(tx catalog.ConfigTx) error {
		objs, gen, err := tx.ListConfigObjects(ctx)
		if err != nil {
			return err
		}
		st, err := configobj.Merge(s.FileConfig(), objs, gen)
		if err != nil {
			return err
		}
		if ifVersion != 0 {
			if err := checkVersion(st, k, name, ifVersion); err != nil {
				return err
			}
		}
		p, err := plan(st, k)
		if err != nil {
			return err
		}
		by := actor.User
		var stored catalog.ConfigObject
		var detail string
		switch p.Verb {
		case configobj.Create:
			stored, err = tx.CreateConfigObject(ctx, catalog.ConfigObject{Kind: string(k), Name: p.Name, Spec: p.Spec, CreatedBy: by})
			detail = fmt.Sprintf("version %d", stored.Version)
		case configobj.Update:
			stored, err = tx.UpdateConfigObject(ctx, catalog.ConfigObject{Kind: string(k), Name: p.Name, Spec: p.Spec, UpdatedBy: by}, ifVersion)
			detail = fmt.Sprintf("version %d (was %d): %s", stored.Version, p.Before.Version, changedDetail(p.Changed))
		case configobj.Delete:
			stored, err = tx.DeleteConfigObject(ctx, string(k), p.Name, ifVersion)
			detail = fmt.Sprintf("version %d deleted", stored.Version)
		}
		if err != nil {
			return err
		}
		// The audit record holds names and versions, never a value of
		// the spec.
		r := catalog.AuditRecord{User: actor.User, TokenID: actor.TokenID, Operation: opID, Object: object, Result: catalog.AuditOK,
			RemoteAddr: service.RemoteAddr(ctx), Detail: detail}
		if err := tx.AppendAudit(ctx, []catalog.AuditRecord{r}); err != nil {
			return err
		}
		out = configobj.Object{Kind: k, Name: p.Name, Source: configobj.FromCatalog, Version: stored.Version, CreatedAt: stored.CreatedAt,
			CreatedBy: stored.CreatedBy, UpdatedAt: stored.UpdatedAt, UpdatedBy: stored.UpdatedBy}
		if p.Verb == configobj.Delete {
			out.Spec = p.Before.Spec
		} else if out.Spec, err = configobj.ParseSpec(p.Spec); err != nil {
			return err
		}
		return nil
	})
	return out, err
}

// checkVersion refuses a change made against another version than the
// catalog's object's, before anything else is said about the change
// (its author must first see what changed).
func checkVersion(st *configobj.State, k configobj.Kind, name string, ifVersion int64) error {
	o, ok := st.Stored(k, name)
	if !ok || o.Version == ifVersion {
		return nil // a missing object is the plan's to report
	}
	return fmt.Errorf("%w: %s %s changed since version %d: it is at version %d (changed by %s at %s); "+
		"read it again and make your change on that version", catalog.ErrStale, k, name, ifVersion, o.Version,
		cmp.Or(o.UpdatedBy, "someone"), o.UpdatedAt.Format("2006-01-02T15:04:05Z07:00"))
}

func changedDetail(keys []string) string {
	if len(keys) == 0 {
		return "no key changed"
	}
	return "changed " + strings.Join(keys, ", ")
}

// configError gives the errors of changes their classes.
func configError(err error) error {
	switch {
	case errors.Is(err, catalog.ErrStale):
		return api.WithClass(api.Conflict, err)
	case errors.Is(err, catalog.ErrConflict):
		return api.Errorf(api.Conflict, "%w: it was created meanwhile: read it and update it instead", err)
	}
	return err
}

// auditRefusal records a refused or failed change. A failure to record
// is logged: the caller's answer stays the change's error.
func (s Ops) auditRefusal(ctx context.Context, actor *auth.Subject, opID, object string, err error) {
	cat, cerr := s.OpenCatalog(ctx)
	if cerr == nil {
		defer cat.Close()
		class := service.Classify(err)
		r := catalog.AuditRecord{User: actor.User, TokenID: actor.TokenID, Operation: opID, Object: object, Result: catalog.AuditError,
			ErrorClass: string(class), RemoteAddr: service.RemoteAddr(ctx)}
		if class == api.Denied || class == api.Unauthenticated {
			r.Result = catalog.AuditDenied
		}
		cerr = cat.AppendAudit(context.WithoutCancel(ctx), []catalog.AuditRecord{r})
	}
	if cerr != nil {
		s.Logger().Warn("recording a refused configuration change in the audit log failed", "operation", opID, "object", object, "err", cerr)
	}
}

// objectDoc is an object's document.
func objectDoc(o configobj.Object) api.ConfigObject {
	spec := o.Spec
	if spec == nil {
		spec = map[string]any{}
	}
	warnings := fileWarnings(spec)
	if o.Kind == configobj.MediaLibrary {
		warnings = append(warnings, mediaall.Warnings(spec)...)
	}
	for _, k := range o.FileKeys {
		warnings = append(warnings, fmt.Sprintf("%s: the configuration file sets it too, and its value is in effect, not this one", k))
	}
	return api.ConfigObject{Kind: string(o.Kind), Name: o.Name, Source: string(o.Source), Version: o.Version, CreatedAt: o.CreatedAt,
		CreatedBy: o.CreatedBy, UpdatedAt: o.UpdatedAt, UpdatedBy: o.UpdatedBy, Overridden: o.Overridden, FileKeys: apidoc.NonNil(o.FileKeys), Spec: spec,
		Warnings: apidoc.NonNil(warnings)}
}

// fileWarnings names the files a spec refers to (password-file,
// secret-file, ca-file: the keys ending in -file) that this process
// cannot open: the object is valid, but using it here would fail.
func fileWarnings(spec map[string]any) []string {
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch v := m[k].(type) {
			case map[string]any:
				walk(prefix+k+".", v)
			case string:
				if !strings.HasSuffix(k, "-file") || v == "" {
					continue
				}
				f, err := os.Open(config.ExpandHome(v))
				if err != nil {
					out = append(out, fmt.Sprintf("%s%s: %v: this server cannot read it, so using the object here fails "+
						"(create the file, readable by coffer only, on every server)", prefix, k, err))
					continue
				}
				_ = f.Close() // opened only to see that this server can read it
			}
		}
	}
	walk("", spec)
	return out
}
