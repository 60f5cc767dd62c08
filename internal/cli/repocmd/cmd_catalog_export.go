package repocmd

import (
	"fmt"
	"os"
	"runtime/debug"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// The server's own recovery: its state exported into the repository and
// imported on a new host (docs/04-policies-and-server.md, "The server's own recovery").

func (a *app) cmdCatalogExport() *cobra.Command {
	var toRepo bool
	var in api.ExportCatalogInput
	cmd := &cobra.Command{
		Use:   "export --to-repository",
		Short: "export the server's state (users, tokens, ACLs, configuration objects, audit log) into the repository",
		Long: command.Manual(`Copy the state of the server that the repository cannot give back into the
repository, sealed with its key: users with their password hashes, API
tokens (their hashes), ACLs, configuration objects created through the
API, the audit log, notification state, the media inventory and the
schedule slots already run. All of it is read in one consistent snapshot
of the catalog, whatever runs meanwhile. Each export has its own ID;
`+"`coffer catalog exports`"+` lists them and `+"`coffer catalog import --from-repository`"+`
brings a lost server back from one. --history adds the jobs' history
(jobs, tasks and their logs); --keep N then deletes all but the N newest
exports. An export that fails deletes what it wrote.

The backup points and the inventory are not exported: `+"`coffer catalog rebuild`"+`
reads the points from the repository, and the next inventory
refresh reads the VMs from the hypervisors.`,
			`"catalog export ID: N rows of T tables in P parts (SIZE)". --json:
{export: {id, created, coffer, schema, history, reason, rows, parts,
stored_bytes, tables: [{name, rows}]}, deleted: [IDs]}.`,
			`coffer catalog export --to-repository
coffer catalog export --to-repository --history --keep 14`,
			"0; 7 without a repository; 6 when older exports could not all be deleted (the new one is made)."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !toRepo {
				return command.Usagef("say where: --to-repository (the repository of --repo, or the server's)")
			}
			limitExportMemory()
			res, err := command.RunOp[*api.CatalogExportResult](cmd.Context(), a.App, "export-catalog", &in)
			if res == nil {
				return err
			}
			return a.Emit(res, err, func() {
				e := res.Export
				a.Printf("catalog export %s: %d rows of %d tables in %d parts (%s)\n", e.ID, e.Rows, len(e.Tables), e.Parts,
					command.HumanBytes(e.StoredBytes))
				for _, id := range res.Deleted {
					a.Printf("deleted older export %s\n", id)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&toRepo, "to-repository", false, "export into the repository (the one place an export goes today)")
	cmd.Flags().BoolVar(&in.Body.History, "history", false, "export the jobs' history (jobs, tasks, logs) too")
	cmd.Flags().IntVar(&in.Body.Keep, "keep", 0, "then delete all but this many newest exports (0: keep all)")
	return command.RemoteToo(command.Op(cmd, "export-catalog"))
}

// exportMemoryLimit is the Go heap's soft limit in a process that runs
// `coffer catalog export`, unless GOMEMLIMIT sets one. An export keeps
// little live (the part it fills, at most 8 MiB, its compressor, the
// catalog driver's cache) and streams the rest, while the collector left
// alone lets the heap grow to twice what is live: the export of a
// 10,000-VM catalog with its history peaked at 106 MiB of RSS without the
// limit, and at 86 MiB with it, for 3% more CPU (bench/catalogexport,
// docs/benchmarks.md). The limit is soft: a heap that needs more gets
// more, and the runtime caps the collector's share of the CPU.
const exportMemoryLimit = 40 << 20

func limitExportMemory() {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(exportMemoryLimit)
	}
}

func (a *app) cmdCatalogExports() *cobra.Command {
	return command.RemoteToo(command.Op(&cobra.Command{
		Use:   "exports [ID]",
		Short: "list the exports of the server's state in the repository, or describe one",
		Long: command.Manual(`List the finished exports of the server's state in the repository, newest
first, or with an ID, describe that export table by table. An export
that was interrupted is not listed (the next export with --keep deletes
it once it is a day old).`,
			`A table: ID, CREATED, REASON, HISTORY, ROWS, SIZE, COFFER; with an ID,
its tables and their rows. --json: a list of {id, created, coffer, schema,
history, reason, rows, parts, stored_bytes, tables: [{name, rows}]}, or
that one document.`,
			`coffer catalog exports
coffer catalog exports 20261207T051500.000Z-0123abcd`,
			"0; 2 for a malformed ID; 7 for an unknown one."),
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				e, err := command.RunOp[*api.CatalogExport](cmd.Context(), a.App, "get-catalog-export", &api.CatalogExportInput{Export: args[0]})
				if err != nil {
					return err
				}
				return a.Emit(e, nil, func() { a.printExport(e) })
			}
			list, err := command.RunOp[[]api.CatalogExport](cmd.Context(), a.App, "list-catalog-exports", &api.RepoParam{})
			if err != nil {
				return err
			}
			return a.Emit(list, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tCREATED\tREASON\tHISTORY\tROWS\tSIZE\tCOFFER")
				for _, e := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%d\t%s\t%s\n", e.ID, e.Created.Local().Format(time.DateTime), e.Reason, e.History,
						e.Rows, command.HumanBytes(e.StoredBytes), e.Coffer)
				}
				_ = tw.Flush()
				a.Printf("%d export(s)\n", len(list))
			})
		},
	}, "list-catalog-exports", "get-catalog-export"))
}

func (a *app) printExport(e *api.CatalogExport) {
	a.Printf("export %s, %s, by coffer %s (catalog schema %d), %s\n", e.ID, e.Created.Local().Format(time.DateTime), e.Coffer, e.Schema, e.Reason)
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	for _, t := range e.Tables {
		fmt.Fprintf(tw, "  %s\t%d\n", t.Name, t.Rows)
	}
	_ = tw.Flush()
	a.Printf("%d rows in %d parts (%s)\n", e.Rows, e.Parts, command.HumanBytes(e.StoredBytes))
}

func (a *app) cmdCatalogImport() *cobra.Command {
	var fromRepo bool
	var in api.ImportCatalogInput
	cmd := &cobra.Command{
		Use:   "import --from-repository",
		Short: "bring the server's state back from an export in the repository",
		Long: command.Manual(`Import an export of the server's state (the newest, or --export ID) into
the catalog, in one transaction: users, tokens, ACLs, configuration
objects, the audit log and the rest are then as they were exported, and
the old API tokens work. An export that is damaged (a part altered, cut
short or missing) imports nothing, and the catalog keeps what it held.

A catalog that already holds users, configuration objects or audit
records is refused; --force replaces its exported tables with the
export's (and still changes nothing when the export is damaged). Then run
`+"`coffer catalog rebuild`"+` for each repository to bring back the backup points.
The export must come from a coffer with the same catalog schema.`,
			`"catalog import ID: N rows of T tables", then what to do next. --json:
{export: {id, ...}, next}.`,
			`coffer catalog import --from-repository
coffer catalog import --from-repository --export 20261207T051500.000Z-0123abcd --force`,
			"0; 2 for a malformed ID, and when the catalog is not empty (without --force); 7 when there is no such export; 5 when the export is damaged."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !fromRepo {
				return command.Usagef("say where from: --from-repository (the repository of --repo, or the server's)")
			}
			res, err := command.RunOp[*api.CatalogImport](cmd.Context(), a.App, "import-catalog", &in)
			if err != nil {
				return err
			}
			return a.Emit(res, nil, func() {
				a.Printf("catalog import %s: %d rows of %d tables\n", res.Export.ID, res.Export.Rows, len(res.Export.Tables))
				a.Printf("next: %s\n", res.Next)
			})
		},
	}
	cmd.Flags().BoolVar(&fromRepo, "from-repository", false, "import from the repository (the one place an export is today)")
	cmd.Flags().StringVar(&in.Body.Export, "export", "", "the export's ID (default: the newest)")
	cmd.Flags().BoolVar(&in.Body.Force, "force", false, "replace what a catalog that is not empty holds")
	return command.RemoteToo(command.Op(cmd, "import-catalog"))
}
