package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
)

// snapshotView is the --json form of a snapshot.
type snapshotView struct {
	ID           string      `json:"id"`
	Short        string      `json:"short_id"`
	Time         time.Time   `json:"time"`
	Source       repo.Source `json:"source"`
	Mode         string      `json:"mode"`
	SnapshotMode string      `json:"snapshot_mode,omitempty"`
	// SnapshotModeAchieved is what the point holds; "unknown" for
	// manifests written before coffer recorded it.
	SnapshotModeAchieved string            `json:"snapshot_mode_achieved"`
	Parent               string            `json:"parent,omitempty"`
	Tags                 map[string]string `json:"tags,omitempty"`
	Protected            bool              `json:"protected"`
	BytesLogical         int64             `json:"bytes_logical"`
	BytesRead            int64             `json:"bytes_read"`
	BytesNew             int64             `json:"bytes_new"`
	BytesStored          int64             `json:"bytes_stored"`
	Duration             float64           `json:"duration_seconds"`
	Disks                []repo.Disk       `json:"disks"`
	Warnings             []string          `json:"warnings,omitempty"`
	// Damage is "" for an intact point, else what verify found it lacks:
	// "N chunk(s) lost" until a new backup of its source stores them again.
	Damage string `json:"damage,omitempty"`
}

func snapshotJSON(s *repo.Snapshot) snapshotView {
	return snapshotView{ID: s.ID.String(), Short: s.ID.Short(), Time: s.Time, Source: s.Source, Mode: s.Mode,
		SnapshotMode: s.SnapshotMode, SnapshotModeAchieved: achievedMode(s.SnapshotModeAchieved), Parent: s.Parent, Tags: s.Tags,
		Protected: s.Protected, BytesLogical: s.Logical(), BytesRead: s.BytesRead, BytesNew: s.BytesNew, BytesStored: s.BytesStored, Duration: s.Duration, Disks: s.Disks, Warnings: s.Warnings}
}

func (a *app) cmdSnapshots() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:     "snapshots",
		Aliases: []string{"ls"},
		Short:   "list backup points",
		Long: `List the backup points of the repository, oldest first, straight from the
repository (no catalog needed). A damaged manifest is reported and skipped.

CONSISTENCY is the snapshot mode the point really holds, with the requested
one beside it when the connector fell back: "crash-consistent (quiesced
requested)" after a quiesce fallback. Points written before coffer recorded
it show "unknown"; disk images read without a snapshot show "as-is".

DAMAGE says what a point lacks: chunks verify found lost (until a new
backup of the source stores them again, which mends every point that uses
them), or spans a repair recorded as lost.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			r, err := a.openRepo(ctx)
			if err != nil {
				return err
			}
			var bad []string
			snaps, err := r.Snapshots(ctx, func(x id.ID, err error) { bad = append(bad, fmt.Sprintf("%s: %v", x.Short(), err)) })
			if err != nil {
				return err
			}
			var out []*repo.Snapshot
			for _, s := range snaps {
				if name == "" || s.Source.VMName == name {
					out = append(out, s)
				}
			}
			damage, err := pointDamage(ctx, r)
			if err != nil {
				return err
			}
			if a.jsonOut {
				views := make([]snapshotView, 0, len(out))
				for _, s := range out {
					v := snapshotJSON(s)
					v.Damage = damageOf(s, damage)
					views = append(views, v)
				}
				return a.printJSON(views)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTIME\tSOURCE\tMODE\tCONSISTENCY\tDISKS\tSIZE\tNEW\tDAMAGE\tTAGS")
			for _, s := range out {
				prot := ""
				if s.Protected {
					prot = " (protected)"
				}
				dmg := damageOf(s, damage)
				if dmg == "" {
					dmg = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s%s\n", s.ID.Short(), s.Time.Local().Format("2006-01-02 15:04:05"),
					s.Source.VMName, s.Mode, consistency(s.SnapshotMode, s.SnapshotModeAchieved), len(s.Disks), humanBytes(s.Logical()),
					humanBytes(s.BytesStored), dmg, formatTags(s.Tags), prot)
			}
			_ = tw.Flush()
			a.printf("%d snapshot(s)\n", len(out))
			for _, b := range bad {
				fmt.Fprintf(a.stderr, "coffer: skipped damaged snapshot %s\n", b)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "only snapshots of this source name")
	return cmd
}

// pointDamage says which points still lack chunks that verify recorded as
// lost (keyed by short ID). It costs one index lookup per recorded chunk:
// the damage record is small.
func pointDamage(ctx context.Context, r *repo.Repository) (map[string]string, error) {
	lost, err := r.DamagedPoints(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for p, chunks := range lost {
		out[p] = fmt.Sprintf("%d chunk(s) lost", len(chunks))
	}
	return out, nil
}

// damageOf adds to what verify recorded the spans a repair marked lost.
func damageOf(s *repo.Snapshot, recorded map[string]string) string {
	parts := []string{}
	if d := recorded[s.ID.Short()]; d != "" {
		parts = append(parts, d)
	}
	var spans int64
	for _, d := range s.Disks {
		spans += d.LostSpans
	}
	if spans > 0 {
		parts = append(parts, fmt.Sprintf("%d span(s) lost (repaired)", spans))
	}
	return strings.Join(parts, ", ")
}

// unknownMode stands for an achieved snapshot mode a manifest does not
// record (written before coffer recorded it): claiming the requested mode
// instead could claim a quiesce that never happened.
const unknownMode = "unknown"

func achievedMode(achieved string) string {
	if achieved == "" {
		return unknownMode
	}
	return achieved
}

// consistency is the achieved snapshot mode, followed by the requested one
// when they differ, so a fallback stands out in a listing.
func consistency(requested, achieved string) string {
	achieved = achievedMode(achieved)
	if requested != "" && requested != achieved {
		return achieved + " (" + requested + " requested)"
	}
	return achieved
}

func formatTags(t map[string]string) string {
	var parts []string
	for k, v := range t {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
