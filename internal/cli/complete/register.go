package complete

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// use is what one command's arguments and flags complete.
type use struct {
	// path is the command below the root: "restore vm".
	path string
	// arg is what its first positional argument completes (nil: nothing
	// dynamic), every its other ones too.
	arg   *Kind
	every bool
	// flags are its flags' kinds; locations are those flags that take a
	// path as well as a name (files complete when no name matches).
	flags     map[string]Kind
	locations map[string]bool
}

// uses is every argument and flag that names a point, a policy, a
// connection, a repository or a job.
var uses = []use{
	// Backup points.
	{path: "restore", arg: &Points},
	{path: "restore vm", arg: &Points, flags: map[string]Kind{"connection": Connections}},
	{path: "files ls", arg: &Points},
	{path: "files find", arg: &Points},
	{path: "files get", arg: &Points},
	{path: "protect", arg: &Points, every: true},
	{path: "copy", arg: &Points, every: true, flags: map[string]Kind{"to": Repositories, "from": Repositories},
		locations: map[string]bool{"to": true, "from": true}},
	{path: "instant start", arg: &Points, flags: map[string]Kind{"connection": Connections}},
	{path: "instant export", arg: &Points},
	{path: "verify boot", arg: &Points},
	{path: "verify boot show", arg: &Points},
	{path: "media contents", arg: &Points},
	{path: "media copy", arg: &Points, every: true},
	{path: "media files", arg: &Points},
	{path: "media restore", arg: &Points},
	// Policies.
	{path: "run", arg: &Policies},
	{path: "plan", arg: &Policies},
	{path: "plan accuracy", arg: &Policies},
	{path: "policy preview", arg: &Policies},
	{path: "jobs", flags: map[string]Kind{"policy": Policies}},
	{path: "storage-snapshots", flags: map[string]Kind{"policy": Policies}},
	// Connections.
	{path: "vms refresh", arg: &Connections},
	{path: "vms", flags: map[string]Kind{"connection": Connections}},
	{path: "vms protection", flags: map[string]Kind{"connection": Connections}},
	{path: "backup vm", flags: map[string]Kind{"connection": Connections}},
	// Repositories: the root's --server-repository serves every command.
	{path: "", flags: map[string]Kind{"server-repository": Repositories}},
	// Jobs.
	{path: "job show", arg: &Jobs},
	{path: "job log", arg: &Jobs},
	{path: "job follow", arg: &Jobs},
	{path: "job cancel", arg: &Jobs},
}

// Register gives root's commands their completions. configPath is the
// --config flag's value when a completion runs. It fails when the table
// names a command or a flag root does not have.
func Register(root *cobra.Command, configPath func() string) error {
	for _, u := range uses {
		cmd := root
		if u.path != "" {
			found, rest, err := root.Find(strings.Fields(u.path))
			if err != nil || len(rest) > 0 || found.CommandPath() != root.Name()+" "+u.path {
				return fmt.Errorf("completion of %q: no such command", u.path)
			}
			cmd = found
		}
		if u.arg != nil {
			k, every := *u.arg, u.every
			cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) > 0 && !every {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return Values(cmd, configPath(), k, toComplete), cobra.ShellCompDirectiveNoFileComp
			}
		}
		for name, k := range u.flags {
			if cmd.Flag(name) == nil {
				return fmt.Errorf("completion of %s --%s: no such flag", cmd.CommandPath(), name)
			}
			location := u.locations[name]
			err := cmd.RegisterFlagCompletionFunc(name, func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				values := Values(cmd, configPath(), k, toComplete)
				if len(values) == 0 && location {
					return nil, cobra.ShellCompDirectiveDefault
				}
				return values, cobra.ShellCompDirectiveNoFileComp
			})
			if err != nil {
				return fmt.Errorf("completion of %s --%s: %w", cmd.CommandPath(), name, err)
			}
		}
	}
	return nil
}
