package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/restore/qcow2"
)

type restoreOptions struct {
	disk      string
	to        string
	overwrite bool
	resume    bool
	format    string
}

func (a *app) cmdRestore() *cobra.Command {
	var o restoreOptions
	cmd := &cobra.Command{
		Use:   "restore SNAPSHOT --to PATH",
		Short: "restore disks of a backup point to files or block devices",
		Long: `Restore the disks of a backup point (an ID, a unique ID prefix, or "latest").

With one disk (or --disk), PATH is the target file or block device. With
several disks, PATH is a directory that receives one file per disk. Files
are written sparse: holes are never written. A file is written under a
temporary name and renamed when complete; --resume continues an interrupted
restore of the same backup point instead of starting over.

EXAMPLES
    coffer restore 3fa2c1d0 --to /var/lib/images/web.raw
    coffer restore latest --disk 1 --to /dev/vg0/restored`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return a.runRestore(cmd, args[0], o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.disk, "disk", "", "restore only this disk (index, key or name)")
	f.StringVar(&o.to, "to", "", "target file, block device or directory (required)")
	f.BoolVar(&o.overwrite, "overwrite", false, "replace an existing target file")
	f.BoolVar(&o.resume, "resume", false, "continue an interrupted restore")
	f.StringVar(&o.format, "format", "raw", "raw (sparse) or qcow2 (written by qemu-img from coffer's NBD server)")
	_ = cmd.MarkFlagRequired("to")
	cmd.AddCommand(a.cmdRestoreVM())
	return cmd
}

func pickDisks(s *repo.Snapshot, sel string) ([]repo.Disk, error) {
	if sel == "" {
		return s.Disks, nil
	}
	for i, d := range s.Disks {
		if d.Key == sel || d.Name == sel || strconv.Itoa(i) == sel {
			return []repo.Disk{d}, nil
		}
	}
	return nil, usagef("snapshot %s has no disk %q", s.ID.Short(), sel)
}

type restoreResult struct {
	Snapshot string  `json:"snapshot"`
	Disk     string  `json:"disk"`
	Target   string  `json:"target"`
	Bytes    int64   `json:"bytes_written"`
	Zero     int64   `json:"bytes_zero"`
	Requests int     `json:"read_requests"`
	Seconds  float64 `json:"seconds"`
	Resumed  bool    `json:"resumed"`
	// Lost are ranges a repair recorded as lost (zeros in the target).
	Lost []hypervisor.Extent `json:"lost_ranges,omitempty"`
}

func (a *app) runRestore(cmd *cobra.Command, ref string, o restoreOptions) error {
	ctx := cmd.Context()
	r, s, release, err := a.openPoint(ctx, ref, "restore "+ref)
	if err != nil {
		return err
	}
	defer release()
	if o.format != "raw" && o.format != "qcow2" {
		return usagef("--format must be raw or qcow2, not %q", o.format)
	}
	disks, err := pickDisks(s, o.disk)
	if err != nil {
		return err
	}
	targets := []string{o.to}
	if len(disks) > 1 {
		if err := os.MkdirAll(o.to, 0o700); err != nil {
			return err
		}
		targets = targets[:0]
		for i, d := range disks {
			targets = append(targets, filepath.Join(o.to, fmt.Sprintf("%d-%s", i, filepath.Base(d.Name))))
		}
	}
	var results []restoreResult
	incomplete := 0
	for i, d := range disks {
		prog := &restore.Progress{}
		bar := a.startProgress("restore "+d.Name, prog.BytesTotal.Load, prog.BytesDone.Load, func() string { return "" })
		start := time.Now()
		var st restore.Stats
		var err error
		if o.format == "qcow2" {
			err = qcow2.Write(ctx, r, d, targets[i], a.log)
		} else {
			st, err = restore.ToFile(ctx, r, s, d, targets[i], restore.FileOptions{Progress: prog, Overwrite: o.overwrite, Resume: o.resume})
		}
		bar.finish()
		if err != nil {
			return fmt.Errorf("disk %s: %w", d.Name, err)
		}
		res := restoreResult{Snapshot: s.ID.String(), Disk: d.Name, Target: targets[i], Bytes: st.BytesWritten, Zero: st.BytesZero,
			Requests: st.Requests, Seconds: time.Since(start).Seconds(), Resumed: st.Resumed, Lost: st.Lost}
		results = append(results, res)
		a.printf("restored %s of snapshot %s to %s: %s written, %s holes, %.1fs (%s)\n", d.Name, s.ID.Short(), targets[i],
			humanBytes(st.BytesWritten), humanBytes(st.BytesZero), res.Seconds, rate(d.Size, time.Since(start)))
		if len(st.Lost) > 0 {
			incomplete++
			a.printf("  %d range(s) of %s were lost to repository damage (recorded by `coffer repair snapshots`) and are zeros in the restored disk:\n", len(st.Lost), d.Name)
			for j, e := range st.Lost {
				if j == 20 {
					a.printf("    and %d more\n", len(st.Lost)-j)
					break
				}
				a.printf("    offset %d, %s\n", e.Offset, humanBytes(e.Length))
			}
		}
	}
	if a.jsonOut {
		if err := a.printJSON(results); err != nil {
			return err
		}
	}
	if incomplete > 0 {
		return partialError{fmt.Sprintf("%d disk(s) restored with lost ranges", incomplete)}
	}
	return nil
}
