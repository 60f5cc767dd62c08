package servicetest

import (
	"context"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/configobj"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/configops"
)

// The tests name configuration objects as the command line does, by kind
// (singular or plural), name and version, and run the operations of that
// kind with their api inputs.

// ListObjects lists the objects of a kind ("": every kind, those in
// effect first, then those the file overrides) as the local operator,
// who sees them all.
func ListObjects(ctx context.Context, s *service.Service, kind string) ([]api.ConfigObject, error) {
	if kind != "" {
		k, err := configobj.ParseKind(kind)
		if err != nil {
			return nil, err
		}
		return configops.Ops{Service: s}.ConfigObjects(AsLocal(ctx), k, &api.ListConfigObjectsInput{})
	}
	var inEffect, overridden []api.ConfigObject
	for _, k := range configobj.Kinds {
		objs, err := configops.Ops{Service: s}.ConfigObjects(AsLocal(ctx), k, &api.ListConfigObjectsInput{})
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if o.Overridden {
				overridden = append(overridden, o)
			} else {
				inEffect = append(inEffect, o)
			}
		}
	}
	return append(append([]api.ConfigObject{}, inEffect...), overridden...), nil
}

// GetObject reads an object.
func GetObject(ctx context.Context, s *service.Service, kind, name string) (*api.ConfigObject, error) {
	k, err := configobj.ParseKind(kind)
	if err != nil {
		return nil, err
	}
	a, err := configops.Ops{Service: s}.ConfigObject(ctx, k, &api.GetConfigObjectInput{ConfigNameParam: api.ConfigNameParam{Name: name}})
	if err != nil {
		return nil, err
	}
	return a.Body, nil
}

// CreateObject creates an object of a kind from its spec.
func CreateObject(ctx context.Context, s *service.Service, kind string, spec map[string]any) (*api.ConfigObject, error) {
	k, err := configobj.ParseKind(kind)
	if err != nil {
		return nil, err
	}
	c, err := configops.Ops{Service: s}.CreateConfigObject(ctx, k, &api.CreateConfigObjectInput{Body: spec})
	if err != nil {
		return nil, err
	}
	return c.Body, nil
}

// UpdateObject replaces an object's spec, if it is still at ifVersion
// (0: whatever it is now).
func UpdateObject(ctx context.Context, s *service.Service, kind, name string, spec map[string]any, ifVersion int64) (*api.ConfigObject, error) {
	k, err := configobj.ParseKind(kind)
	if err != nil {
		return nil, err
	}
	a, err := configops.Ops{Service: s}.UpdateConfigObject(ctx, k, &api.UpdateConfigObjectInput{ConfigNameParam: api.ConfigNameParam{Name: name},
		IfMatchParam: api.IfVersion(ifVersion), Body: spec})
	if err != nil {
		return nil, err
	}
	return a.Body, nil
}

// DeleteObject deletes an object, if it is still at ifVersion (0:
// whatever it is now).
func DeleteObject(ctx context.Context, s *service.Service, kind, name string, ifVersion int64) (*api.ConfigObject, error) {
	k, err := configobj.ParseKind(kind)
	if err != nil {
		return nil, err
	}
	return configops.Ops{Service: s}.DeleteConfigObject(ctx, k, &api.DeleteConfigObjectInput{ConfigNameParam: api.ConfigNameParam{Name: name},
		IfMatchParam: api.IfVersion(ifVersion)})
}
