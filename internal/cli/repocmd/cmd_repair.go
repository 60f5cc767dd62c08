package repocmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// repairOutput is what every repair prints.
const repairOutput = `The plan (with --dry-run) or what was done, step by step; what it cannot
keep (already unreadable) and the points that lost data through it.
--json: {dry_run, steps, kept, dropped, affected_points: [{point_id, vm,
disk, spans}]}.`

// repairCommand builds one `coffer repair X` command.
func (a *app) repairCommand(what, short, long string) *cobra.Command {
	in := api.RepairInput{What: what}
	cmd := &cobra.Command{
		Use:   what,
		Short: short,
		Long: command.Manual(long+"\n\nWith --dry-run it prints the plan and changes nothing.", repairOutput,
			"coffer repair "+what+" --dry-run\ncoffer repair "+what,
			"0; 4 when another maintenance run holds the lease."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := command.RunOp[*api.RepairReport](cmd.Context(), a.App, "repair", &in)
			if err != nil {
				return err
			}
			return a.Emit(rep, nil, func() { a.printRepair(rep) })
		},
	}
	cmd.Flags().BoolVar(&in.Body.DryRun, "dry-run", false, "print the plan and change nothing")
	return command.RemoteToo(command.Op(cmd, "repair"))
}

func (a *app) printRepair(rep *api.RepairReport) {
	verb := "did"
	if rep.DryRun {
		verb = "would do (dry run, nothing changed)"
	}
	a.Printf("repair %s:\n", verb)
	for _, s := range rep.Steps {
		a.Printf("    %s\n", s)
	}
	if rep.Dropped > 0 {
		a.Printf("cannot keep %d chunk(s) or span(s): they were unreadable before this repair\n", rep.Dropped)
	}
	for _, af := range rep.AffectedPoints {
		a.Printf("    point %s (%s) disk %s lost %d span(s); a new backup of it stores them again from the source\n", af.PointID, af.VM, af.Disk, af.Spans)
	}
	if !rep.DryRun {
		a.Printf("next: coffer verify\n")
	}
}

func (a *app) cmdRepair() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "mend a damaged repository without losing anything readable",
		Long: command.Manual(`Mend what `+"`coffer verify`"+` found. Every repair keeps every chunk, disk map
block and manifest that can still be read and authenticated; it works out
its plan first, says what it cannot keep (only what is already unreadable)
and which backup points lost data through that, and with --dry-run stops
there. Damaged objects are moved aside to damaged/ rather than deleted.
verify names the repairs a repository needs, in the order to run them:

    coffer repair config      rewrite a damaged config from its authenticated copy
    coffer repair keys        rewrite damaged key file copies from intact ones
    coffer repair index       rebuild the index from the packs
    coffer repair packs       rewrite packs with a damaged header, trailer or chunks
    coffer repair snapshots   mend damaged disk maps and recover points whose manifest is lost
    coffer repair undelete    bring back locked objects hidden by deletes (Object Lock)`,
			"See the subcommands.",
			`coffer verify --read-data
coffer repair packs --dry-run
coffer repair packs`,
			"That of the subcommand."),
	}
	cmd.AddCommand(a.repairCommand("config", "write a damaged or missing config again from its authenticated copy",
		`Every key file carries an authenticated copy of the repository's config.
When the config is damaged, deleted or edited, coffer opens the repository
with that copy (and says so); this writes the config again from it.`))
	cmd.AddCommand(a.repairCommand("keys", "write damaged or missing key file copies again from intact ones",
		`Every key file is stored twice (keys/ID and keys/ID.copy), so one damaged or
deleted copy never locks a password out. This writes each damaged or
missing copy again from the intact one: for the key of the password given,
the copy that opened the repository; for other keys, the only copy that
still parses.`))
	cmd.AddCommand(a.repairCommand("index", "rebuild the chunk index from the packs",
		`Rebuild the chunk index from the trailers of all packs (packs are
self-describing) and replace every existing index segment, damaged ones
included. For a pack whose trailer is damaged, the index entries whose
chunks authenticate are kept. Entries that point into missing packs, or at
chunks that no longer authenticate, are dropped: the plan names the
backup points that had lost those chunks. Run it when verify reports a
damaged index segment or a missing pack.`))
	cmd.AddCommand(a.repairCommand("packs", "rewrite damaged packs, keeping every chunk that authenticates",
		`Rewrite the packs that verify recorded broken chunks in, and those whose
header or trailer (table of contents) is damaged or that were cut short:
every chunk that still authenticates moves to a new pack, the index is
rewritten without the damaged packs, and they are moved aside to damaged/.
Chunks that do not authenticate were lost already; they stay marked lost,
so the next backup of an affected disk stores them again from the source.
Run `+"`coffer verify --read-data`"+` first, so that broken chunks are recorded.`))
	cmd.AddCommand(a.repairCommand("snapshots", "mend damaged disk maps and recover points whose manifest is lost",
		`Write a new disk map for every backup point whose map is damaged: every
span whose chunk ID can still be read is kept, the spans of unreadable
blocks are marked lost (a restore then names the missing ranges). Disk
maps that no readable manifest references (its manifest is unreadable or
was deleted, or a forget was interrupted) become recovered points, one per
disk, named recovered-...; forget them if they are not wanted. Unreadable
manifests are moved aside to damaged/.`))
	cmd.AddCommand(command.RemoteToo(command.Op(&cobra.Command{
		Use:   "undelete",
		Short: "make locked objects hidden by deletes or rewrites current again (Object Lock buckets)",
		Long: command.Manual(`On a bucket with Object Lock a lock protects one version of an object:
someone allowed to delete can still hide it behind a delete marker, or stack
an unlocked version on top, and coffer then finds the repository (config,
keys, backup points) gone or damaged. For every object of the repository
this removes what sits above its newest locked version (and delete markers
above any object's newest version), which makes the locked data current
again. It needs no password and deletes only what hides a version.

After an attack that deleted everything it could, the immutable points come
back with:

    coffer repair undelete     # the config, keys, points and packs reappear
    coffer repair index        # the index was not locked: rebuild it from the packs
    coffer restore POINT --to FILE`,
			`How many objects were made current, delete markers and unlocked versions
removed, and what to run next. --json: {objects, delete_markers,
versions, names}.`,
			`coffer repair undelete
coffer repair undelete --json | jq -r '.names[]'`,
			"0; 2 for storage that keeps no versions; 3 without the permission to delete versions."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := command.RunOp[*api.UndeleteReport](cmd.Context(), a.App, "undelete", &api.RepoParam{})
			if err != nil {
				return err
			}
			return a.Emit(rep, nil, func() {
				a.Printf("made %d object(s) current again: removed %d delete marker(s) and %d unlocked version(s) on top\n", rep.Objects, rep.DeleteMarkers, rep.Versions)
				if rep.Objects > 0 {
					a.Printf("next: coffer repair index (rebuilds the index from the packs), then coffer verify\n")
				}
			})
		},
	}, "undelete")))
	return cmd
}
