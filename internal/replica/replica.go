// Package replica keeps a standby copy of a VM on a host of the DR site:
// "replica from backup". Each run brings the standby to the newest backup
// point of its VM, reading from the repository only the chunks that differ
// from the point the standby already equals (the two points' disk maps say
// which), so production is not read a second time.
//
// A standby is a directory: per disk a chain of qcow2 overlays, one per
// restore point (the oldest a standalone image, each later one backed by
// the previous), a record (replica.json) naming the points, and the
// standby's definition (standby.json). The newest Keep points are kept;
// failover may start from any of them, through a new overlay on top of
// the chosen point so that the points stay as they are.
//
// Why an overlay chain and not qcow2 internal snapshots: a run writes
// into a new file that nothing refers to until the record is replaced
// (rename), so a kill at any instant leaves the standby at its last
// complete point, and the run's file is a leftover the next run deletes.
// Internal snapshots would have the run write into the image in place,
// and a kill mid-run would leave the active layer half-written, with
// refcounts that need `qemu-img check -r` (lazy refcounts, leaked
// clusters): recoverable, but through a repair rather than by
// construction. Pruning merges the oldest overlay into the next one, also
// under the record (prune.go).
package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Options say where the standby is and how many points it keeps.
type Options struct {
	// Dir is the standby's directory on the target host.
	Dir string
	// Keep is how many restore points the standby keeps (at least 1).
	Keep int
	// Networks maps the source's networks to the DR site's: every network
	// the VM is attached to must be named (standby.go).
	Networks map[string]string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger

	// hook, in tests, is called at each stage where a kill must leave
	// the standby at its last complete point.
	hook func(stage string)
}

// Result is what a run did.
type Result struct {
	// Point is the standby's newest point after the run.
	Point *Point
	// UpToDate says the standby already equalled the backup point.
	UpToDate bool
	// Pruned are the points merged away to keep Keep.
	Pruned []Point
	// Spans is how many spans were written (changed since the previous point).
	Spans int
}

// ErrFailedOver refuses to replicate onto a standby that is the running VM.
var ErrFailedOver = errors.New("the standby was failed over")

// ErrOlderPoint refuses a backup point older than the standby's newest.
var ErrOlderPoint = errors.New("the backup point is older than the standby's newest point")

// Run brings the standby in o.Dir to backup point p of repository r. The
// standby's new point is complete once Run returns; a Run killed at any
// instant leaves it at its previous point.
func Run(ctx context.Context, r *repo.Repository, p *repo.Point, o Options) (*Result, error) {
	o = o.withDefaults()
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	lock, err := lockRun(dir, true)
	if err != nil {
		return nil, err
	}
	defer func() { _ = lock.Close() }() // releases the run lock
	st, err := LoadState(dir)
	if err != nil {
		return nil, err
	}
	if st.FailedOver != nil {
		return nil, fmt.Errorf("%w: %s runs from point %d since %s; fail back first", ErrFailedOver, dir, st.FailedOver.Seq, st.FailedOver.At.Format(time.RFC3339))
	}
	if err := recoverStandby(ctx, dir, st, o.Log); err != nil {
		return nil, fmt.Errorf("recover the standby in %s: %w", dir, err)
	}
	cfg, err := MapNetworks(p, o.Networks)
	if err != nil {
		return nil, err
	}
	if n := st.Newest(); n != nil {
		if n.BackupPoint == p.ID.String() {
			// A run killed between its record and its pruning left
			// more points than kept.
			pruned, err := prune(ctx, dir, st, o.Keep, o.hook)
			if err != nil {
				return nil, err
			}
			return &Result{Point: st.Newest(), UpToDate: true, Pruned: pruned}, writeDefinition(dir, cfg, st.Newest())
		}
		if p.Time.Before(n.SourceTime) {
			return nil, fmt.Errorf("%w: %s (%s) before %s (%s)", ErrOlderPoint, p.ID.Short(), p.Time.Format(time.RFC3339), n.BackupPoint, n.SourceTime.Format(time.RFC3339))
		}
	}
	st.VM = p.Source.VMName
	pt, spans, err := writePoint(ctx, r, p, dir, st, o)
	if err != nil {
		return nil, err
	}
	o.hook("written")
	st.Seq, st.Points = pt.Seq, append(st.Points, *pt)
	if err := saveState(dir, st); err != nil {
		return nil, err
	}
	o.Log.Info("replica point committed", "vm", st.VM, "seq", pt.Seq, "backup_point", pt.BackupPoint, "spans", spans, "bytes_read", pt.BytesRead)
	pruned, err := prune(ctx, dir, st, o.Keep, o.hook)
	if err != nil {
		return nil, fmt.Errorf("point %d committed; pruning: %w", pt.Seq, err)
	}
	return &Result{Point: st.Newest(), Pruned: pruned, Spans: spans}, writeDefinition(dir, cfg, st.Newest())
}

func (o Options) withDefaults() Options {
	if o.Keep < 1 {
		o.Keep = 1
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.hook == nil {
		o.hook = func(string) {}
	}
	return o
}

// writePoint writes one new overlay per disk of p and makes them durable;
// the caller commits them by saving the record.
func writePoint(ctx context.Context, r *repo.Repository, p *repo.Point, dir string, st *State, o Options) (*Point, int, error) {
	guard, err := guardFiles(chainFiles(st))
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = guard.Close() }() // releases the guard
	seq := st.Seq + 1
	pt := &Point{Seq: seq, BackupPoint: p.ID.String(), SourceTime: p.Time}
	spans := 0
	for _, d := range p.Disks {
		if d.Kind == "memory" {
			continue
		}
		rd, n, err := writeDisk(ctx, r, d, dir, seq, st.Newest(), o.hook)
		if err != nil {
			return nil, 0, fmt.Errorf("disk %s: %w", d.Key, err)
		}
		pt.Disks = append(pt.Disks, rd.disk)
		pt.BytesRead += rd.read
		pt.BytesWritten += rd.written
		spans += n
	}
	if err := syncDir(dir); err != nil {
		return nil, 0, err
	}
	pt.ReplicatedAt = o.Now().UTC()
	return pt, spans, nil
}

type diskWritten struct {
	disk          Disk
	read, written int64
}

// writeDisk creates disk d's overlay of point seq on the previous point's
// and writes the changed spans into it.
func writeDisk(ctx context.Context, r *repo.Repository, d repo.Disk, dir string, seq int, prev *Point, hook func(string)) (diskWritten, int, error) {
	file := filepath.Join(dir, fmt.Sprintf("disk-%s-%06d.qcow2", fileKey(d.Key), seq))
	var backing *Disk
	if prev != nil {
		backing = prev.Disk(d.Key)
	}
	if err := createOverlay(ctx, file, backing, d.Size); err != nil {
		return diskWritten{}, 0, err
	}
	m, err := r.OpenDiskMap(ctx, d.Map)
	if err != nil {
		return diskWritten{}, 0, err
	}
	var old []id.ID
	if backing != nil {
		// A previous map the repository no longer has (forgotten and
		// collected) means every span is written: still correct.
		if pm, err := r.OpenDiskMap(ctx, backing.Map); err == nil {
			old, _ = pm.All(ctx)
		}
	}
	w, err := openOverlay(ctx, file)
	if err != nil {
		return diskWritten{}, 0, err
	}
	hook("overlay-created")
	res, err := applyDisk(ctx, r, w, m, old, backing != nil, hook)
	if err != nil {
		w.kill()
		return diskWritten{}, 0, err
	}
	if err := w.Close(ctx); err != nil {
		return diskWritten{}, 0, err
	}
	if err := syncFile(file); err != nil {
		return diskWritten{}, 0, err
	}
	// Committed points are never written again except by a merge.
	if err := os.Chmod(file, 0o444); err != nil {
		return diskWritten{}, 0, err
	}
	return diskWritten{disk: Disk{Key: d.Key, Name: d.Name, File: file, Size: d.Size, Map: d.Map},
		read: res.read, written: res.written + res.zeroed}, res.spans, nil
}

// createOverlay makes an empty qcow2 image of size at file, backed by the
// previous point's overlay of the same disk when there is one (named
// relative to the directory, so the standby can move as a whole).
func createOverlay(ctx context.Context, file string, backing *Disk, size int64) error {
	args := []string{"create", "-q", "-f", "qcow2"}
	if backing != nil {
		args = append(args, "-b", filepath.Base(backing.File), "-F", "qcow2")
	}
	args = append(args, file, fmt.Sprint(size))
	out, err := qemuCommand(ctx, "qemu-img", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img create %s: %v: %s", file, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// chainFiles lists every overlay of every recorded point.
func chainFiles(st *State) []string {
	var out []string
	for _, p := range st.Points {
		for _, d := range p.Disks {
			out = append(out, d.File)
		}
	}
	return out
}

// fileKey makes a disk key safe in a file name.
func fileKey(key string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			return c
		}
		return '_'
	}, key)
}
