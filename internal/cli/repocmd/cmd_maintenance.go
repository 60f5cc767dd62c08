package repocmd

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdVerify() *cobra.Command {
	var in api.VerifyInput
	var subset, memory string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "check the repository's integrity",
		Long: command.Manual(`Check that every backup point is complete: manifests and disk maps decode,
every chunk they need is indexed, and every indexed pack exists with the
size the index implies. With --read-data every pack is read and every chunk
decrypted and re-hashed; --read-data-subset reads a share of the packs
("5%", or "2/7" for the second of seven groups, to spread a full read over
a week). Each problem names the backup points, disks and offsets it
affects, says whether a point lost data or only metadata is damaged, and
what mends it. Broken chunk copies go into the repository's damage record
(unless --no-record), so that the next backup of an affected disk stores
them again.

verify holds a lease on the repository while it runs (`+"`coffer locks`"+`).`,
			`What was checked and read, each problem (DATA LOST or DAMAGED (metadata
only), with the points, disks and offsets it affects), the verdict, and
the repairs to run next, in order. --json: {points, disks,
chunks_referenced, packs, packs_read, chunks_read, read_bytes, problems:
[{kind, object, detail, data_loss, repair, affects: [{point_id, vm,
disk, offset_bytes, spans}]}], damaged_points, intact_points, repairs,
damage_recorded, notices}.`,
			`coffer verify
coffer verify --read-data
coffer verify --read-data-subset 1/7 --json`,
			"0 when nothing is wrong; 5 when a problem is found."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if memory != "" {
				n, err := command.ParseSize(memory)
				if err != nil {
					return command.Usagef("--memory: %v", err)
				}
				in.Body.MemoryBytes = n
			}
			if subset != "" {
				if err := parseSubset(subset, &in.Body); err != nil {
					return err
				}
			}
			rep, err := command.RunOp[*api.VerifyReport](cmd.Context(), a.App, "verify", &in)
			if rep == nil {
				return err
			}
			if err := a.Emit(rep, nil, func() { a.printVerify(rep, in.Body.ReadData || subset != "") }); err != nil {
				return err
			}
			if err != nil {
				// The report's "next" lines are the advice.
				return command.Reported{Err: err, Advised: true}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&in.Body.ReadData, "read-data", false, "read and check every chunk")
	cmd.Flags().StringVar(&subset, "read-data-subset", "", `read a share of the packs: "N%" or "n/m"`)
	cmd.Flags().StringVar(&memory, "memory", "64MiB", "memory for sorting chunk IDs; the rest spills to temporary files")
	cmd.Flags().BoolVar(&in.Body.NoRecord, "no-record", false, "do not write what was found broken into the repository's damage record")
	cmd.AddCommand(a.cmdVerifyBoot())
	return command.RemoteToo(command.Op(cmd, "verify"))
}

func parseSubset(s string, in *api.VerifyRequest) error {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v <= 0 || v > 100 {
			return command.Usagef("--read-data-subset %q: want a percentage in (0, 100]", s)
		}
		in.SubsetPercent = v
		return nil
	}
	n, m, ok := strings.Cut(s, "/")
	num, err1 := strconv.Atoi(n)
	den, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || num < 1 || den < 1 || num > den {
		return command.Usagef("--read-data-subset %q: want N%% or n/m with 1 <= n <= m", s)
	}
	in.SubsetNum, in.SubsetDen = num, den
	return nil
}

func (a *app) printVerify(rep *api.VerifyReport, read bool) {
	a.Printf("checked %d backup point(s), %d disk(s), %d chunk reference(s), %d pack(s)\n", rep.Points, rep.Disks, rep.ChunksReferenced, rep.Packs)
	if read {
		a.Printf("read %d pack(s), %d chunk(s), %s\n", rep.PacksRead, rep.ChunksRead, command.HumanBytes(rep.ReadBytes))
	}
	for _, p := range rep.Problems {
		severity := "DAMAGED (metadata only)"
		if p.DataLoss {
			severity = "DATA LOST"
		}
		fmt.Fprintf(a.Stdout, "%s %s %s: %s\n", severity, p.Kind, p.Object, p.Detail)
		for _, af := range p.Affects {
			where := "the whole disk"
			if af.OffsetBytes >= 0 {
				where = fmt.Sprintf("%d span(s), the first at offset %d", af.Spans, af.OffsetBytes)
			}
			fmt.Fprintf(a.Stdout, "    point %s (%s) disk %s: %s\n", af.PointID, af.VM, af.Disk, where)
		}
	}
	for _, n := range rep.Notices {
		a.Printf("note: %s\n", n)
	}
	if len(rep.Problems) == 0 {
		a.Printf("no problems found\n")
		return
	}
	if len(rep.DamagedPoints) > 0 {
		var names []string
		for _, d := range rep.DamagedPoints {
			names = append(names, fmt.Sprintf("%s (%s: %s)", d.PointID, d.VM, strings.Join(d.Disks, ", ")))
		}
		a.Printf("%d backup point(s) lost data: %s; the other %d are intact\n", len(rep.DamagedPoints), strings.Join(names, ", "), rep.IntactPoints)
	} else {
		a.Printf("no backup lost data: all %d backup point(s) are intact; the damage is to metadata that a repair rewrites\n", rep.Points)
	}
	if rep.DamageRecorded > 0 {
		a.Printf("recorded %d broken chunk cop(ies): backups no longer reuse them, and the next backup of an affected disk stores them again\n", rep.DamageRecorded)
	}
	a.Printf("next:\n")
	for _, step := range rep.Repairs {
		a.Printf("    %s\n", step)
	}
}

func (a *app) cmdForget() *cobra.Command {
	var in api.ForgetInput
	var within string
	var tags []string
	cmd := &cobra.Command{
		Use:   "forget",
		Short: "remove backup points by retention rules (GFS)",
		Long: command.Manual(`Remove backup points that no keep rule selects, separately for every source.
--keep-last N keeps the newest N; --keep-hourly/daily/weekly/monthly/yearly N
keep the newest point of each of the last N hours, days, ISO weeks, months
and years; --keep-within D keeps everything within D of the newest point.
Protected points (`+"`coffer protect`"+`) are always kept, and so are points
under object lock (until their lock ends) and the newest point of each
source that passed boot verification (`+"`coffer verify boot`"+`), unless
--forget-boot-verified. Forgotten points leave the
catalog too. Space is reclaimed by `+"`coffer gc`"+`.`,
			`Per source: how many points are kept and removed, each removed point,
and the locked ones kept. --json: {dry_run, sources: [{vm, vm_id,
connection, source_kind, keep: [{point_id, time, protected, reasons}],
remove: [...], locked: [{point_id, locked_until}]}], catalog_warning}.`,
			`coffer forget --keep-daily 7 --keep-weekly 4 --keep-monthly 12 --dry-run
coffer forget --keep-last 3 --name web-1`,
			"0; 2 without a keep rule (coffer refuses to forget everything)."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if within != "" {
				d, err := time.ParseDuration(within)
				if err != nil {
					return command.Usagef("--keep-within: %v", err)
				}
				in.Body.Keep.WithinSeconds = d.Seconds()
			}
			var err error
			if in.Body.Tags, err = command.ParseTags(tags); err != nil {
				return err
			}
			res, err := command.RunOp[*api.ForgetResult](cmd.Context(), a.App, "forget", &in)
			if res == nil {
				return err
			}
			return a.Emit(res, err, func() {
				a.PrintForget(res.Sources, res.DryRun)
				if res.CatalogWarning != "" {
					fmt.Fprintf(a.Stderr, "coffer: warning: %s\n", res.CatalogWarning)
				}
			})
		},
	}
	f := cmd.Flags()
	keep := &in.Body.Keep
	f.IntVar(&keep.Last, "keep-last", 0, "keep the newest N points")
	f.IntVar(&keep.Hourly, "keep-hourly", 0, "keep one point for each of the last N hours")
	f.IntVar(&keep.Daily, "keep-daily", 0, "keep one point for each of the last N days")
	f.IntVar(&keep.Weekly, "keep-weekly", 0, "keep one point for each of the last N weeks")
	f.IntVar(&keep.Monthly, "keep-monthly", 0, "keep one point for each of the last N months")
	f.IntVar(&keep.Yearly, "keep-yearly", 0, "keep one point for each of the last N years")
	f.StringVar(&within, "keep-within", "", "keep points within this duration of the newest (e.g. 72h)")
	f.StringVar(&in.Body.VM, "name", "", "only sources with this name")
	f.StringArrayVar(&tags, "tag", nil, "only points with this tag KEY=VALUE (repeatable)")
	f.BoolVar(&in.Body.DryRun, "dry-run", false, "only show what would be removed")
	f.BoolVar(&in.Body.ForgetBootVerified, "forget-boot-verified", false, "let the rules remove the newest point proven to boot too")
	return command.RemoteToo(command.Op(cmd, "forget"))
}

func (a *app) cmdGC() *cobra.Command {
	var in api.GCInput
	var budget string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "reclaim space no backup point needs",
		Long: command.Manual(`Delete chunks no backup point references, repack mostly-empty packs and
compact the index. Backups keep running meanwhile: deletion of anything a
running session might still use (a backup, a restore, files being read, a
VM running from its backup) waits until that session has ended (the next
gc run, or --wait). Memory does not grow with the repository: what does
(chunk IDs, index entries, packs) is sorted within --memory and spilled to
$TMPDIR beyond it; the process needs about 60 MiB on top. Only one gc runs at a time; nothing locked by the
storage (object lock) is ever deleted.`,
			`What was marked, planned and repacked, then what was deleted, or the
sessions the deletion waits for. --json: {dry_run, points,
chunks_referenced, chunks_indexed, packs_planned, packs_deleted,
packs_repacked, freed_bytes, repacked_bytes, segments_merged,
maps_deleted, chunks_rescued, deferred, waiting_for, objects_locked,
leftovers_removed}.`,
			`coffer gc --dry-run
coffer gc --wait 30m`,
			"0 (also when the deletion is deferred); 4 when another maintenance run holds the lease."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if budget != "" {
				n, err := command.ParseSize(budget)
				if err != nil {
					return command.Usagef("--memory: %v", err)
				}
				in.Body.MemoryBytes = n
			}
			in.Body.WaitSeconds = wait.Seconds()
			rep, err := command.RunOp[*api.GCReport](cmd.Context(), a.App, "gc", &in)
			if err != nil {
				return err
			}
			return a.Emit(rep, nil, func() {
				a.Printf("marked %d chunk(s) of %d backup point(s); %d pack(s) planned for deletion, %d repacked (%s copied)\n",
					rep.ChunksReferenced, rep.Points, rep.PacksPlanned, rep.PacksRepacked, command.HumanBytes(rep.RepackedBytes))
				if rep.DryRun {
					a.Printf("dry run: would free about %s\n", command.HumanBytes(rep.FreedBytes))
					return
				}
				a.Printf("deleted %d pack(s) and %d disk map(s), merged %d index segment(s), rescued %d chunk(s)\n",
					rep.PacksDeleted, rep.MapsDeleted, rep.SegmentsMerged, rep.ChunksRescued)
				if rep.Deferred {
					a.Printf("deletion deferred until these sessions end (run gc again later, or use --wait):\n")
					for _, w := range rep.WaitingFor {
						a.Printf("    %s\n", w)
					}
				}
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&in.Body.DryRun, "dry-run", false, "only report what would be freed")
	f.StringVar(&budget, "memory", "64MiB", "memory for sorting chunk IDs, index entries and packs (the rest spills to $TMPDIR)")
	f.DurationVar(&wait, "wait", 0, "wait up to this long for running sessions instead of deferring deletion")
	f.Float64Var(&in.Body.RepackThreshold, "repack-threshold", 0.3, "repack packs with at least this fraction of dead data")
	return command.RemoteToo(command.Op(cmd, "gc"))
}

func (a *app) cmdStats() *cobra.Command {
	return command.RemoteToo(command.Op(&cobra.Command{
		Use:   "stats",
		Short: "show repository size, deduplication and compression",
		Long: command.Manual(`Show the repository's sizes and what deduplication and compression save:
the logical size of every disk of every point, the non-zero data they
reference, the unique data (distinct chunks), what those take compressed
and encrypted, and everything stored. It reads every manifest and disk
map and lists the storage, so it takes a while on large repositories.`,
			`One line per figure; ratios are x:1. --json: {points, disks,
logical_bytes, data_bytes, unique_bytes, chunks, chunk_bytes,
stored_bytes, pack_bytes, packs, index_segments, objects, dedup_ratio,
compression_ratio, total_ratio}.`,
			`coffer stats
coffer stats --json | jq .total_ratio`,
			"0; 7 without a repository."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := command.RunOp[*api.Stats](cmd.Context(), a.App, "stats", &api.RepoParam{})
			if err != nil {
				return err
			}
			return a.Emit(st, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintf(tw, "snapshots\t%d (%d disks)\n", st.Points, st.Disks)
				fmt.Fprintf(tw, "logical size\t%s\n", command.HumanBytes(st.LogicalBytes))
				fmt.Fprintf(tw, "data (non-zero)\t%s\n", command.HumanBytes(st.DataBytes))
				fmt.Fprintf(tw, "unique data\t%s in %d chunks\n", command.HumanBytes(st.UniqueBytes), st.Chunks)
				fmt.Fprintf(tw, "stored\t%s (%d packs, %d index segments, %d objects)\n", command.HumanBytes(st.StoredBytes), st.Packs, st.IndexSegments, st.Objects)
				fmt.Fprintf(tw, "deduplication\t%.2fx\n", st.DedupRatio)
				fmt.Fprintf(tw, "compression\t%.2fx\n", st.CompressionRatio)
				fmt.Fprintf(tw, "overall\t%.2fx (logical / stored)\n", st.TotalRatio)
				_ = tw.Flush()
			})
		},
	}, "stats"))
}
