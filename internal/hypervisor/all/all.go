// Package all is the one registry of hypervisor platforms a production
// binary knows: how a connection of the configuration (kind: qemu,
// libvirt, vsphere) is checked and opened. Every platform is named here
// explicitly, as restic's backend/all does: importing a connector
// registers nothing by side effect. Tests add the simulated fleet with
// Register (internal/service/servicetest), so no test double ships in
// the binary.
package all

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Config is what a connector factory receives: the connection's
// configuration entry plus coffer-wide settings a connector may need.
type Config struct {
	policy.Connection
	// StateDir is where connectors journal what they create on a
	// hypervisor, so leftovers can be found after a crash.
	StateDir string
	Logger   *slog.Logger
}

// Kind is one hypervisor platform: how a connection's options are
// checked (without contacting anything) and how it is opened, and what the
// platform cannot do, so a policy asking for it is refused before it runs
// instead of failing or degrading VM by VM.
type Kind struct {
	Check func(cfg Config) error
	Open  func(ctx context.Context, cfg Config) (hypervisor.Connector, error)
	// Cannot names the snapshot modes the platform cannot take, and why.
	Cannot map[hypervisor.SnapshotMode]string
	// StorageSnapshots: the connector itself provides storage-level
	// snapshots (a StorageSnapshotter method), as group: datastore needs.
	StorageSnapshots bool
	// DiskLatency: the connector's sessions report their VM's disk I/O
	// times (hypervisor.IOStatser), a source of latency-control.
	DiskLatency bool
	// Elsewhere, when the platform can only be protected from its
	// hypervisor's host, says so of a connection that names another host
	// than this one (nil otherwise): the operations that would open it in
	// this process refuse it with that message before any snapshot.
	Elsewhere func(cfg Config) error
}

// kinds is the registry (qemu.go, libvirt.go and vsphere.go wire each
// platform in).
var (
	kindsMu sync.RWMutex
	kinds   = map[string]Kind{
		"libvirt": {Check: checked(libvirtOptions), Open: newLibvirtConnector, Cannot: libvirtCannot, Elsewhere: libvirtElsewhere, DiskLatency: true},
		"qemu":    {Check: checked(qemuOptions), Open: newQEMUConnector, DiskLatency: true},
		"vsphere": {Check: checked(vsphereOptions), Open: newVSphereConnector},
	}
)

// Register adds a platform to the registry. Production code does not
// call it: it is how tests plug in the simulated fleet of
// internal/hypervisor/fake (servicetest.RegisterFake), so that no test
// double ships in the binary.
func Register(name string, k Kind) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	kinds[name] = k
}

// Lookup is the platform registered as name.
func Lookup(name string) (Kind, bool) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	k, ok := kinds[name]
	return k, ok
}

// Kinds names the platforms this build knows.
func Kinds() []string {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	var out []string
	for k := range kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func checked[T any](decode func(Config) (T, error)) func(Config) error {
	return func(cfg Config) error {
		_, err := decode(cfg)
		return err
	}
}

// UnknownKind refuses connection conn of a kind this build does not know.
func UnknownKind(conn, kind string) error {
	return fmt.Errorf("connection %s: this build of coffer has no %q connector (known: %s)", conn, kind, strings.Join(Kinds(), ", "))
}
