package replicaops

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/coffer-backup/coffer/internal/failover"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/replica"
	"github.com/coffer-backup/coffer/internal/repo"
)

// standbyDefiner is a DR host's connector that defines a standby as a VM
// of its own hypervisor (libvirt).
type standbyDefiner interface {
	DefineStandby(ctx context.Context, cfg hypervisor.VMConfig, sb hypervisor.Standby) error
}

// standbySuffix names a standby's domain after its VM, apart from it: a
// DR host may hold the source VM too (replication both ways).
const standbySuffix = "-standby"

// defineStandby defines the standby in dir of point p's VM on the
// replication's DR host when its connection defines VMs (libvirt). On a
// QEMU host the standby is its definition file alone (standby.json).
func (s Ops) defineStandby(ctx context.Context, repl policy.Replication, dir string, p *repo.Point) error {
	conn, closeConn, err := s.libvirtDRHost(ctx, repl)
	if conn == nil || err != nil {
		return err
	}
	defer closeConn()
	d, ok := conn.(standbyDefiner)
	if !ok {
		return fmt.Errorf("connection %s cannot define a standby domain here", repl.Connection)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	var vm hypervisor.VMConfig
	if err := json.Unmarshal(p.VMConfig, &vm); err != nil {
		return fmt.Errorf("the point's VM configuration: %w", err)
	}
	sb := hypervisor.Standby{Name: p.Source.VMName + standbySuffix, UUID: standbyUUID(dir), Disks: map[string]string{}, Networks: repl.Networks}
	for _, disk := range p.Disks {
		if disk.Kind != "memory" {
			sb.Disks[disk.Key] = replica.ActiveFile(dir, disk.Key)
		}
	}
	return d.DefineStandby(ctx, vm, sb)
}

// standbyUUID is the standby domain's UUID, the same at every run (each
// redefines the same domain), from its directory: unique on its host.
func standbyUUID(dir string) string {
	h := sha256.Sum256([]byte("coffer standby " + dir))
	h[6] = h[6]&0x0f | 0x80 // version 8: custom
	h[8] = h[8]&0x3f | 0x80 // RFC 9562 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// standbyRunner is a DR host's connector that starts and stops the
// standby domains it defined (libvirt).
type standbyRunner interface {
	StartStandby(ctx context.Context, uuid string) error
	StopStandby(ctx context.Context, uuid string) error
	StandbyRunning(ctx context.Context, uuid string) (bool, error)
}

// standbyDomain is one standby's domain, as failover.StandbyDomain.
type standbyDomain struct {
	conn standbyRunner
	uuid string
}

func (d standbyDomain) Start(ctx context.Context) error { return d.conn.StartStandby(ctx, d.uuid) }
func (d standbyDomain) Stop(ctx context.Context) error  { return d.conn.StopStandby(ctx, d.uuid) }
func (d standbyDomain) Running(ctx context.Context) (bool, error) {
	return d.conn.StandbyRunning(ctx, d.uuid)
}

// attachDomains gives each VM of fp its standby domain when the
// replication's DR host is a libvirt connection (defineStandby defined
// them), so that failover starts the domain rather than a QEMU of its
// own. The returned func closes the connection, after the operation.
func (s Ops) attachDomains(ctx context.Context, repl policy.Replication, fp *failover.Plan) (func(), error) {
	conn, closeConn, err := s.libvirtDRHost(ctx, repl)
	if conn == nil || err != nil {
		return closeConn, err
	}
	r, ok := conn.(standbyRunner)
	if !ok {
		closeConn()
		return nil, fmt.Errorf("connection %s cannot start a standby domain here", repl.Connection)
	}
	for gi := range fp.Groups {
		for i := range fp.Groups[gi].VMs {
			vm := &fp.Groups[gi].VMs[i]
			dir, err := filepath.Abs(vm.Dir)
			if err != nil {
				closeConn()
				return nil, err
			}
			vm.Domain = standbyDomain{conn: r, uuid: standbyUUID(dir)}
		}
	}
	return closeConn, nil
}

// libvirtDRHost opens the replication's DR host when it is a libvirt
// connection, whose standbys are domains; it returns a nil connector
// (and a no-op close) for a QEMU host, whose standbys start as QEMUs of
// coffer's. The close func ends the connection, after the operation.
func (s Ops) libvirtDRHost(ctx context.Context, repl policy.Replication) (hypervisor.Connector, func(), error) {
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, nil, err
	}
	if cc, ok := cfg.Connection(repl.Connection); !ok || cc.Kind != "libvirt" {
		return nil, func() {}, nil
	}
	conns, err := s.OpenConnectors(ctx, cfg, []string{repl.Connection})
	if err != nil {
		return nil, nil, err
	}
	return conns.Conns[repl.Connection], conns.Close, nil
}
