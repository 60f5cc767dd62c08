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

// instantDomains opens connection name for an instant recovery of a
// libvirt domain; close ends its connection.
func (s Ops) instantDomains(ctx context.Context, name string) (instant.Domains, func(), error) {
	if name == "" {
		return nil, nil, service.Invalidf("the backup point is of a libvirt domain: name the connection to run it on (--connection)")
	}
	pc, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, nil, err
	}
	conns, err := s.OpenConnectors(ctx, pc, []string{name})
	if err != nil {
		return nil, nil, err
	}
	d, ok := conns.Conns[name].(instant.Domains)
	if !ok {
		conns.Close()
		return nil, nil, service.Invalidf("connection %s (%s) cannot run a VM from a backup point", name, conns.Conns[name].Kind())
	}
	return d, conns.Close, nil
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
// of a vSphere VM; close ends its connection.
func (s Ops) instantVCenter(ctx context.Context, name string) (instant.VCenter, func(), error) {
	if name == "" {
		return nil, nil, service.Invalidf("the backup point is of a vSphere VM: name the connection to run it on (--connection)")
	}
	pc, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, nil, err
	}
	conns, err := s.OpenConnectors(ctx, pc, []string{name})
	if err != nil {
		return nil, nil, err
	}
	vc, ok := conns.Conns[name].(instant.VCenter)
	if !ok {
		conns.Close()
		return nil, nil, service.Invalidf("connection %s (%s) cannot run a vSphere VM from a backup point", name, conns.Conns[name].Kind())
	}
	return vc, conns.Close, nil
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
