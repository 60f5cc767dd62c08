package restoreops

import (
	"context"
	"slices"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/storagesnap/ship"
)

// ShipStorageSnapshots sends the kept snapshots of every btrfs or reflink
// provider with a ship-to (in.Provider: that one's) to its ship-to
// directory, on the DR site's filesystem of the same kind: each not yet
// there, oldest first, against the one shipped before it
// (internal/storagesnap/ship).
func (s Ops) ShipStorageSnapshots(ctx context.Context, in *api.ShipStorageSnapshotsInput) (*api.StorageShipment, error) {
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, err
	}
	var targets []ship.Target
	for _, p := range cfg.StorageSnapshots {
		if p.ShipTo != "" && (in.Provider == "" || p.Name == in.Provider) {
			targets = append(targets, ship.Target{Provider: p.Name, Kind: p.Kind, To: p.ShipTo})
		}
	}
	if len(targets) == 0 {
		if in.Provider != "" {
			return nil, service.Invalidf("no storage-snapshots provider named %q has a ship-to", in.Provider)
		}
		return nil, service.Invalidf("no storage-snapshots provider has a ship-to: add ship-to (a directory on the DR site's btrfs or reflink filesystem) to a btrfs or reflink provider")
	}
	got, err := ship.Ship(ctx, s.Config.StateDir, targets)
	out := &api.StorageShipment{Shipped: []api.ShippedStorageSnapshot{}}
	for _, g := range got {
		out.Shipped = append(out.Shipped, api.ShippedStorageSnapshot{Label: g.Label, Provider: g.Provider, Datastore: g.Datastore,
			To: g.To, Parent: g.Parent, Bytes: g.Bytes, Seconds: g.Took.Seconds()})
	}
	return out, err
}

// shippedOrKept is the state directory a restore from a storage snapshot
// reads: the server's (its kept snapshots), or from, when it is a
// provider's ship-to (the copies shipped there, at the DR site). Any
// other directory is refused: the records read there name the files a
// restore clones.
func (s Ops) shippedOrKept(ctx context.Context, from string) (string, error) {
	if from == "" {
		return s.Config.StateDir, nil
	}
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return "", err
	}
	if !slices.ContainsFunc(cfg.StorageSnapshots, func(p policy.StorageProvider) bool { return p.ShipTo != "" && p.ShipTo == from }) {
		return "", service.Invalidf("--from %s is no storage-snapshots provider's ship-to", from)
	}
	return from, nil
}
