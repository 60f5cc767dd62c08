package restoreops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"encoding/json"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/instant"
	"github.com/coffer-backup/coffer/internal/repo"
)

// pointVMKind is the kind of VM configuration a point records ("" for
// none).
func pointVMKind(snap *repo.Point) string {
	var cfg hypervisor.VMConfig
	if json.Unmarshal(snap.VMConfig, &cfg) != nil {
		return ""
	}
	return cfg.Kind
}

// instantTarget opens connection name for an instant recovery of a
// point of a VM of platform, as the target T that runs it there; close
// ends its connection.
func instantTarget[T any](ctx context.Context, s Ops, name, platform string) (T, func(), error) {
	var none T
	if name == "" {
		return none, nil, service.Invalidf("the backup point is of a %s: name the connection to run it on (--connection)", platform)
	}
	pc, err := s.EngineConfig(ctx)
	if err != nil {
		return none, nil, err
	}
	conns, err := s.OpenConnectors(ctx, pc, []string{name})
	if err != nil {
		return none, nil, err
	}
	t, ok := conns.Conns[name].(T)
	if !ok {
		conns.Close()
		return none, nil, service.Invalidf("connection %s (%s) cannot run a %s from a backup point", name, conns.Conns[name].Kind(), platform)
	}
	return t, conns.Close, nil
}

// instantDomains opens connection name for an instant recovery of a
// libvirt domain.
func (s Ops) instantDomains(ctx context.Context, name string) (instant.Domains, func(), error) {
	return instantTarget[instant.Domains](ctx, s, name, "libvirt domain")
}

// domainRunning asks a session's connection whether its domain runs;
// false when the connection cannot say.
func (s Ops) domainRunning(ctx context.Context, sess *instant.Session) bool {
	d, closeConn, err := s.instantDomains(ctx, sess.Connection)
	if err != nil {
		return false
	}
	defer closeConn()
	running, err := instant.DomainRunning(ctx, sess, d)
	return err == nil && running
}

// instantVCenter opens vSphere connection name for an instant recovery
// of a vSphere VM.
func (s Ops) instantVCenter(ctx context.Context, name string) (instant.VCenter, func(), error) {
	return instantTarget[instant.VCenter](ctx, s, name, "vSphere VM")
}

// vsphereRunning asks a session's vCenter whether its VM is powered on;
// false when the connection cannot say.
func (s Ops) vsphereRunning(ctx context.Context, sess *instant.Session) bool {
	vc, closeConn, err := s.instantVCenter(ctx, sess.Connection)
	if err != nil {
		return false
	}
	defer closeConn()
	running, err := instant.VSphereRunning(ctx, sess, vc)
	return err == nil && running
}
