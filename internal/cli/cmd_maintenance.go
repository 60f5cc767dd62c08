package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/forget"
	"github.com/coffer-backup/coffer/internal/repo/gc"
	"github.com/coffer-backup/coffer/internal/repo/verify"
	"github.com/coffer-backup/coffer/internal/retention"
	"github.com/coffer-backup/coffer/internal/stats"
)

func (a *app) cmdVerify() *cobra.Command {
	var readData, noRecord bool
	var subset string
	var memory string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "check the repository's integrity",
		Long: `Check that every backup point is complete: manifests and disk maps decode,
every chunk they need is indexed, and every indexed pack exists with the
size the index implies. With --read-data every pack is read and every chunk
decrypted and re-hashed; --read-data-subset reads a share of the packs
("5%", or "2/7" for the second of seven groups, to spread a full read over
a week). Each problem names the backup points, disks and offsets it affects.

Exit status 5 when a problem is found.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			o := verify.Options{ReadData: readData || subset != "", Progress: &verify.Progress{}, NoRecord: noRecord}
			if memory != "" {
				n, err := parseSize(memory)
				if err != nil {
					return usagef("--memory: %v", err)
				}
				o.MemoryBudget = int(n)
			}
			if subset != "" {
				if err := parseSubset(subset, &o); err != nil {
					return err
				}
			}
			r, err := a.openRepo(ctx)
			if err != nil {
				return err
			}
			lease, err := r.AcquireLease(ctx, "verify", "", "verify", false)
			if err != nil {
				return err
			}
			defer lease.Release(ctx)
			bar := a.startProgress("verify", o.Progress.PacksTotal.Load, o.Progress.PacksDone.Load, func() string { return "" })
			rep, err := verify.Run(ctx, r, o)
			bar.finish()
			if err != nil {
				return err
			}
			if a.jsonOut {
				if err := a.printJSON(rep); err != nil {
					return err
				}
			} else {
				a.printVerify(rep, o.ReadData)
			}
			if !rep.OK() {
				// The report's "next" lines are the advice.
				return integrityError{msg: fmt.Sprintf("%d problem(s) found", len(rep.Problems)), reported: true}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&readData, "read-data", false, "read and check every chunk")
	cmd.Flags().StringVar(&subset, "read-data-subset", "", `read a share of the packs: "N%" or "n/m"`)
	cmd.Flags().StringVar(&memory, "memory", "64MiB", "memory for sorting chunk IDs; the rest spills to temporary files")
	cmd.Flags().BoolVar(&noRecord, "no-record", false, "do not write what was found broken into the repository's damage record")
	return cmd
}

func parseSubset(s string, o *verify.Options) error {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v <= 0 || v > 100 {
			return usagef("--read-data-subset %q: want a percentage in (0, 100]", s)
		}
		o.SubsetPercent = v
		return nil
	}
	n, m, ok := strings.Cut(s, "/")
	num, err1 := strconv.Atoi(n)
	den, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || num < 1 || den < 1 || num > den {
		return usagef("--read-data-subset %q: want N%% or n/m with 1 <= n <= m", s)
	}
	o.SubsetNum, o.SubsetDen = num, den
	return nil
}

func (a *app) printVerify(rep *verify.Report, read bool) {
	a.printf("checked %d backup point(s), %d disk(s), %d chunk reference(s), %d pack(s)\n", rep.Snapshots, rep.Disks, rep.Chunks, rep.Packs)
	if read {
		a.printf("read %d pack(s), %d chunk(s), %s\n", rep.PacksRead, rep.ChunksRead, humanBytes(rep.BytesRead))
	}
	for _, p := range rep.Problems {
		severity := "DAMAGED (metadata only)"
		if p.DataLoss {
			severity = "DATA LOST"
		}
		fmt.Fprintf(a.stdout, "%s %s %s: %s\n", severity, p.Kind, p.Object, p.Detail)
		for _, af := range p.Affects {
			where := "the whole disk"
			if af.Offset >= 0 {
				where = fmt.Sprintf("%d span(s), the first at offset %d", af.Spans, af.Offset)
			}
			fmt.Fprintf(a.stdout, "    point %s (%s) disk %s: %s\n", af.Snapshot, af.Source, af.Disk, where)
		}
	}
	for _, n := range rep.Notices {
		a.printf("note: %s\n", n)
	}
	if rep.OK() {
		a.printf("no problems found\n")
		return
	}
	if rep.DataLoss() {
		var names []string
		for _, d := range rep.Damaged {
			names = append(names, fmt.Sprintf("%s (%s: %s)", d.Snapshot, d.Source, strings.Join(d.Disks, ", ")))
		}
		a.printf("%d backup point(s) lost data: %s; the other %d are intact\n", len(rep.Damaged), strings.Join(names, ", "), rep.Intact)
	} else {
		a.printf("no backup lost data: all %d backup point(s) are intact; the damage is to metadata that a repair rewrites\n", rep.Snapshots)
	}
	if rep.Recorded > 0 {
		a.printf("recorded %d broken chunk cop(ies): backups no longer reuse them, and the next backup of an affected disk stores them again\n", rep.Recorded)
	}
	a.printf("next:\n")
	for _, step := range rep.Repairs {
		a.printf("    %s\n", step)
	}
}

func (a *app) cmdForget() *cobra.Command {
	var p retention.Policy
	var within string
	var name string
	var tags []string
	var dry bool
	cmd := &cobra.Command{
		Use:   "forget",
		Short: "remove backup points by retention rules (GFS)",
		Long: `Remove backup points that no keep rule selects, separately for every source.
--keep-last N keeps the newest N; --keep-hourly/daily/weekly/monthly/yearly N
keep the newest point of each of the last N hours, days, ISO weeks, months
and years; --keep-within D keeps everything within D of the newest point.
Protected points (` + "`coffer protect`" + `) and points under a retention lock are
always kept. Space is reclaimed by ` + "`coffer gc`" + `.

EXAMPLES
    coffer forget --keep-daily 7 --keep-weekly 4 --keep-monthly 12 --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if within != "" {
				d, err := time.ParseDuration(within)
				if err != nil {
					return usagef("--keep-within: %v", err)
				}
				p.Within = d
			}
			tm, err := parseTags(tags)
			if err != nil {
				return err
			}
			if p.Empty() {
				return usagef("no keep rule given: use --keep-last, --keep-daily, ... (refusing to forget everything)")
			}
			r, err := a.openRepo(ctx)
			if err != nil {
				return err
			}
			groups, err := forget.Run(ctx, r, forget.Options{Policy: p, Name: name, Tags: tm, DryRun: dry})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(groups)
			}
			for _, g := range groups {
				a.printf("%s: keep %d, remove %d\n", g.Source.VMName, len(g.Keep), len(g.Remove))
				for _, d := range g.Remove {
					verb := "removed"
					if dry {
						verb = "would remove"
					}
					a.printf("    %s %s %s\n", verb, d.ID[:8], d.Time.Local().Format(time.DateTime))
				}
				for _, l := range g.Locked {
					a.printf("    kept: %s\n", l)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&p.Last, "keep-last", 0, "keep the newest N points")
	f.IntVar(&p.Hourly, "keep-hourly", 0, "keep one point for each of the last N hours")
	f.IntVar(&p.Daily, "keep-daily", 0, "keep one point for each of the last N days")
	f.IntVar(&p.Weekly, "keep-weekly", 0, "keep one point for each of the last N weeks")
	f.IntVar(&p.Monthly, "keep-monthly", 0, "keep one point for each of the last N months")
	f.IntVar(&p.Yearly, "keep-yearly", 0, "keep one point for each of the last N years")
	f.StringVar(&within, "keep-within", "", "keep points within this duration of the newest (e.g. 72h)")
	f.StringVar(&name, "name", "", "only sources with this name")
	f.StringArrayVar(&tags, "tag", nil, "only points with this tag KEY=VALUE (repeatable)")
	f.BoolVar(&dry, "dry-run", false, "only show what would be removed")
	return cmd
}

func (a *app) cmdGC() *cobra.Command {
	var o gc.Options
	var budget string
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "reclaim space no backup point needs",
		Long: `Delete chunks no backup point references, repack mostly-empty packs and
compact the index. Backups keep running meanwhile: deletion of anything a
running session might still use waits until that session has ended (the
next gc run, or --wait). Memory is bounded by --memory (chunk IDs beyond
it are sorted on disk). Only one gc runs at a time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if budget != "" {
				n, err := parseSize(budget)
				if err != nil {
					return usageError{err}
				}
				o.MemoryBudget = int(n)
			}
			r, err := a.openRepo(ctx)
			if err != nil {
				return err
			}
			rep, err := gc.Run(ctx, r, o)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(rep)
			}
			a.printf("marked %d chunk(s) of %d snapshot(s); %d pack(s) planned for deletion, %d repacked (%s copied)\n",
				rep.ChunksReferenced, rep.Snapshots, rep.PacksPlanned, rep.PacksRepacked, humanBytes(rep.BytesRepacked))
			if rep.DryRun {
				a.printf("dry run: would free about %s\n", humanBytes(rep.BytesFreed))
				return nil
			}
			a.printf("deleted %d pack(s) and %d disk map(s), merged %d index segment(s), rescued %d chunk(s)\n",
				rep.PacksDeleted, rep.MapsDeleted, rep.SegmentsMerged, rep.ChunksRescued)
			if rep.Deferred {
				a.printf("deletion deferred until these sessions end (run gc again later, or use --wait):\n")
				for _, w := range rep.WaitingFor {
					a.printf("    %s\n", w)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.DryRun, "dry-run", false, "only report what would be freed")
	f.StringVar(&budget, "memory", "64MiB", "memory budget for chunk IDs")
	f.DurationVar(&o.Wait, "wait", 0, "wait up to this long for running sessions instead of deferring deletion")
	f.Float64Var(&o.RepackThreshold, "repack-threshold", 0.3, "repack packs with at least this fraction of dead data")
	return cmd
}

func (a *app) cmdStats() *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "show repository size, deduplication and compression",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			r, err := a.openRepo(ctx)
			if err != nil {
				return err
			}
			s, err := stats.Compute(ctx, r)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(s)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "snapshots\t%d (%d disks)\n", s.Snapshots, s.Disks)
			fmt.Fprintf(tw, "logical size\t%s\n", humanBytes(s.Logical))
			fmt.Fprintf(tw, "data (non-zero)\t%s\n", humanBytes(s.Data))
			fmt.Fprintf(tw, "unique data\t%s in %d chunks\n", humanBytes(s.Unique), s.Chunks)
			fmt.Fprintf(tw, "stored\t%s (%d packs, %d index segments, %d objects)\n", humanBytes(s.Stored), s.Packs, s.Segments, s.Objects)
			fmt.Fprintf(tw, "deduplication\t%.2fx\n", s.Dedup)
			fmt.Fprintf(tw, "compression\t%.2fx\n", s.Compression)
			fmt.Fprintf(tw, "overall\t%.2fx (logical / stored)\n", s.Total)
			return tw.Flush()
		},
	}
}
