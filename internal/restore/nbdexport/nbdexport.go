// Package nbdexport serves backed-up disks over coffer's NBD server,
// straight from the repository. Instant recovery boots VMs from it, `coffer
// instant export` hands it to any NBD client, and qcow2 restores let
// qemu-img read from it; it sits below all three so that none of them
// depends on another.
package nbdexport

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"

	"github.com/coffer-backup/coffer/internal/nbd"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
)

// CacheBytes bounds the chunk cache of each served disk (256 chunks of the
// default 1 MiB, 64 of 4 MiB); a booting guest rereads the same blocks
// often.
const CacheBytes = 256 << 20

// diskExport adapts a backup point's disk to the NBD server.
type diskExport struct{ *restore.DiskReader }

func (e diskExport) Allocated() []nbd.Extent {
	var out []nbd.Extent
	for _, x := range e.DiskReader.Allocated() {
		out = append(out, nbd.Extent{Offset: x.Offset, Length: x.Length})
	}
	return out
}

// NewExport serves one restored disk over NBD.
func NewExport(dr *restore.DiskReader) nbd.Export { return diskExport{dr} }

// limitMemory sets a soft heap limit for a process serving exports, unless
// GOMEMLIMIT is set: the chunk cache is bounded, but without a limit Go's
// collector lets the heap reach twice the live data, and a client reading
// at full speed leaves garbage at its read rate.
func limitMemory(disks int) {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(disks)*CacheBytes + 128<<20)
	}
}

// Exports opens every disk of s for serving, keyed by disk key; the
// default export "" is the first disk.
func Exports(ctx context.Context, r *repo.Repository, s *repo.Point) (map[string]nbd.Export, []string, error) {
	limitMemory(len(s.Disks))
	exports := map[string]nbd.Export{}
	var names []string
	for _, d := range s.Disks {
		dr, err := restore.OpenDisk(ctx, r, d, restore.CacheChunks(CacheBytes, d.ChunkSize))
		if err != nil {
			return nil, nil, fmt.Errorf("disk %s: %w", d.Key, err)
		}
		exports[d.Key] = diskExport{dr}
		names = append(names, d.Key)
	}
	if len(names) > 0 {
		exports[""] = exports[names[0]]
	}
	return exports, names, nil
}

// Listen opens the server's socket ("unix", path or "tcp", host:port),
// replacing a stale unix socket left by a dead server.
func Listen(network, addr string) (net.Listener, error) {
	if network == "unix" {
		_ = os.Remove(addr) // a stale socket, if any: Listen reports what matters
	}
	return net.Listen(network, addr)
}

// Serve runs the read-only NBD server for exports on l until ctx ends.
func Serve(ctx context.Context, l net.Listener, exports map[string]nbd.Export, names []string, log *slog.Logger) error {
	srv := &nbd.Server{
		Lookup: func(n string) (nbd.Export, bool) { e, ok := exports[n]; return e, ok },
		List:   func() []string { return names },
		Log:    log,
	}
	if err := srv.Serve(ctx, l); err != nil {
		return fmt.Errorf("nbd server: %w", err)
	}
	return nil
}
