package restoreops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/offload"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/restore/qcow2"
)

// restoreDisks is a restore-disk request with its target on this host:
// the target file or block device for one disk, a directory that
// receives one file per disk for several.
type restoreDisks struct {
	api.RestoreRequest
	Point string
}

// RestoreDisks restores disks of a backup point of the default repository
// under a restore lease. Disks with ranges a repair recorded as lost are
// restored with zeros there: the results come back with a partial error.
// Copies, when above 1, makes that many copies of each disk in all: the
// restored one and copies cloned from it (test copies).
func (s Ops) RestoreDisks(ctx context.Context, call *api.RestoreDiskInput) ([]api.RestoredDisk, error) {
	if err := s.toVMsHost(ctx, &call.WorkerParam, call.Point); err != nil {
		return nil, err
	}
	if out, remote, err := service.OnWorker[[]api.RestoredDisk](ctx, s.Service, "restore-disk", &call.WorkerParam, call,
		s.PointJob(job.KindRestore, call.Point)); remote {
		return out, err
	}
	to, err := s.HostPath(s.Config.Files.RestoreDir, service.RestoreDir, call.Body.To)
	if err != nil {
		return nil, err
	}
	in := restoreDisks{RestoreRequest: call.Body, Point: call.Point}
	in.To = to
	if in.Format == "" {
		in.Format = "raw"
	}
	if in.Format != "raw" && in.Format != "qcow2" {
		return nil, service.Invalidf("--format must be raw or qcow2, not %q", in.Format)
	}
	if in.To == "" {
		return nil, service.Invalidf("no restore target given (--to)")
	}
	return service.Run(ctx, s.Service, s.PointJob(job.KindRestore, in.Point), func(ctx context.Context, t service.Job) ([]api.RestoredDisk, error) {
		pt, err := s.OpenPoint(ctx, in.Point, "restore "+in.Point)
		if err != nil {
			return nil, err
		}
		defer pt.Release()
		disks, err := service.PickDisks(pt.Point, in.Disk)
		if err != nil {
			return nil, err
		}
		targets, err := service.DiskTargets(in.To, disks)
		if err != nil {
			return nil, err
		}
		copies, err := copyTargets(in, targets)
		if err != nil {
			return nil, err
		}
		out := []api.RestoredDisk{}
		incomplete := 0
		for i, d := range disks {
			prog := &restore.Progress{}
			t.Progress(service.Meter{Label: "restore " + d.Name, Done: prog.BytesDone.Load, Total: prog.BytesTotal.Load})
			// The log says where each disk goes: a face that shows the
			// task rather than the answer (the console) shows this.
			t.Log(slog.LevelInfo, fmt.Sprintf("restoring disk %s (%d bytes) to %s as %s", d.Name, d.Size, targets[i], in.Format))
			start := time.Now()
			var st restore.Stats
			var err error
			if in.Format == "qcow2" {
				// qemu-img writes the image: refuse what the raw
				// writer refuses before it starts.
				if err = restore.CheckTarget(targets[i], in.Overwrite); err == nil {
					err = qcow2.Write(ctx, pt.Repo, d, targets[i], s.Logger())
				}
			} else {
				st, err = restore.ToFile(ctx, pt.Repo, pt.Point, d, targets[i], restore.FileOptions{Progress: prog, Overwrite: in.Overwrite, Resume: in.Resume,
					NoOffload: in.NoOffload})
			}
			if err != nil {
				return out, fmt.Errorf("disk %s: %w", d.Name, err)
			}
			s.ReportZeroing(t, d.Name, st)
			res := api.RestoredDisk{PointID: pt.Point.ID.String(), Disk: d.Name, Target: targets[i], Format: in.Format, SizeBytes: d.Size,
				WrittenBytes: st.BytesWritten, ZeroBytes: st.BytesZero, ZeroOffloadedBytes: st.ZeroOffloaded, ZeroWrittenBytes: st.ZeroWritten,
				ReadRequests:    st.Requests,
				DurationSeconds: time.Since(start).Seconds(), Resumed: st.Resumed, LostRanges: []api.Range{}}
			for _, e := range st.Lost {
				res.LostRanges = append(res.LostRanges, api.Range{OffsetBytes: e.Offset, LengthBytes: e.Length})
			}
			if len(st.Lost) > 0 {
				incomplete++
			}
			t.Log(slog.LevelInfo, fmt.Sprintf("restored disk %s to %s", d.Name, targets[i]))
			if res.Copies, err = s.makeCopies(ctx, t, d.Name, targets[i], copies[i],
				offload.CopyOptions{Overwrite: in.Overwrite || in.Resume, NoOffload: in.NoOffload}); err != nil {
				return out, fmt.Errorf("disk %s: %w", d.Name, err)
			}
			out = append(out, res)
		}
		if incomplete > 0 {
			return out, api.Errorf(api.Partial, "%d disk(s) restored with lost ranges", incomplete)
		}
		return out, nil
	})
}
