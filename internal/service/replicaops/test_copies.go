package replicaops

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/failover"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/replica/vsstandby"
)

// testCopier is a DR host's connector that runs a test failover's
// throw-away copies of the standby domains it defined (libvirt).
type testCopier interface {
	StartTestCopy(ctx context.Context, cfg hypervisor.VMConfig, cp hypervisor.TestCopy) error
	DestroyTestCopy(ctx context.Context, name string) error
}

// domainCopies is a connection's testCopier as failover.DomainCopies.
type domainCopies struct {
	conn testCopier
	host string // the connection's name
}

func (d domainCopies) Host() string { return d.host }
func (d domainCopies) StartCopy(ctx context.Context, cfg hypervisor.VMConfig, cp hypervisor.TestCopy) error {
	return d.conn.StartTestCopy(ctx, cfg, cp)
}
func (d domainCopies) DestroyCopy(ctx context.Context, name string) error {
	return d.conn.DestroyTestCopy(ctx, name)
}

// attachCopies lets a test failover start each VM of fp as a copy of its
// standby domain when the replication's DR host is a libvirt connection
// (a QEMU host's standbys start as QEMUs of coffer's). The returned func
// closes the connection, after the test.
func (s Ops) attachCopies(ctx context.Context, repl policy.Replication, fp *failover.Plan) (func(), error) {
	conn, closeConn, err := s.libvirtDRHost(ctx, repl)
	if conn == nil || err != nil {
		return closeConn, err
	}
	c, ok := conn.(testCopier)
	if !ok {
		closeConn()
		return nil, fmt.Errorf("connection %s cannot start a test copy of a standby domain here", repl.Connection)
	}
	for gi := range fp.Groups {
		for i := range fp.Groups[gi].VMs {
			fp.Groups[gi].VMs[i].Copies = domainCopies{conn: c, host: repl.Connection}
		}
	}
	return closeConn, nil
}

// destroyCopy ends a killed test failover's copy named name on the
// connection host (failover.CopyDestroyer).
func (s Ops) destroyCopy(ctx context.Context, host, name string) error {
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return err
	}
	conns, err := s.OpenConnectors(ctx, cfg, []string{host})
	if err != nil {
		return err
	}
	defer conns.Close()
	if vs, ok := conns.Conns[host].(vsphereDR); ok {
		return vsstandby.DestroyTestCopy(ctx, vs.Client(), name)
	}
	c, ok := conns.Conns[host].(testCopier)
	if !ok {
		return fmt.Errorf("connection %s cannot end a test copy of a standby domain", host)
	}
	return c.DestroyTestCopy(ctx, name)
}
