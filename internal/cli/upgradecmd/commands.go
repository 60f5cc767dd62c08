package upgradecmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// app is the shared command.App, on which this package's commands are
// built.
type app struct{ *command.App }

// Commands are the upgradecmd commands, for the root of the tree.
func Commands(shared *command.App) []*cobra.Command {
	a := &app{shared}
	up := &cobra.Command{Use: "upgrade", Short: "check what installing this coffer would change, before it changes anything",
		Long: command.Manual(`Before an upgrade, run the new coffer's upgrade check with the host's
configuration: it names what the upgrade would change (catalog
migrations, other versions holding leases, repositories of other
formats, deprecated keys) and changes nothing. docs/upgrading.md gives
the order in which to upgrade servers, workers and other hosts.`,
			"See the subcommand.", "coffer upgrade check", "0.")}
	up.AddCommand(a.cmdCheck())
	return []*cobra.Command{up}
}

func (a *app) cmdCheck() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "name pending catalog migrations, lease holders of other versions, repositories of other formats and deprecated keys",
		Long: command.Manual(`Run the coffer you are about to install, with the configuration of the
host, before anything changes (docs/upgrading.md). It reads, without
changing them:
- the catalog's schema: the migrations this coffer would apply when it
  opens it (a catalog a newer coffer migrated is refused);
- the catalog's leases held by a coffer of another version (the servers
  still to upgrade; a holder of v0.1.0 or earlier names no version);
- each configured repository's format version: the same, older (this
  coffer reads it), or newer (this coffer refuses it);
- the keys of the configuration file that a later release removes.
Through --server, the server's coffer answers for its own catalog,
repositories and file.`,
			`One section per item. --json: {version, catalog: {location, schema,
known, pending, newer, error}, lease_holders: [{lease, holder, version,
expires_at}], repositories: [{name, location, format_version,
supported_format, state, error}], deprecated_keys: [{key, file, since,
instead}], ready}.`,
			`coffer upgrade check --json`,
			`0 when the check ran, whatever it found ("ready" says whether anything
stands in the way); 1 when it could not run.`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := command.RunOp[*api.UpgradeCheck](cmd.Context(), a.App, "check-upgrade", &api.UpgradeCheckInput{})
			if err != nil {
				return err
			}
			return a.Emit(doc, nil, func() { a.printCheck(doc) })
		},
	}
	return command.RemoteToo(command.Op(cmd, "check-upgrade"))
}

func (a *app) printCheck(d *api.UpgradeCheck) {
	w := a.Stdout
	c := d.Catalog
	fmt.Fprintf(w, "coffer %s\n\ncatalog %s: schema %d, this coffer knows %d\n", d.Version, c.Location, c.Schema, c.Known)
	switch {
	case c.Newer:
		fmt.Fprintf(w, "  migrated by a newer coffer: this one refuses it\n")
	case c.Error != "":
		fmt.Fprintf(w, "  cannot be read: %s\n", c.Error)
	case len(c.Pending) == 0:
		fmt.Fprintf(w, "  no migration pending\n")
	default:
		fmt.Fprintf(w, "  pending migrations, applied when this coffer opens it: %s\n", strings.Join(c.Pending, ", "))
	}
	fmt.Fprintf(w, "\nleases held by other versions: %d\n", len(d.LeaseHolders))
	for _, l := range d.LeaseHolders {
		v := l.Version
		if v == "" {
			v = "a version that names none (v0.1.0 or earlier)"
		}
		fmt.Fprintf(w, "  %s: %s, coffer %s, until %s\n", l.Lease, l.Holder, v, l.ExpiresAt.Local().Format("2006-01-02 15:04:05"))
	}
	fmt.Fprintf(w, "\nrepositories:\n")
	for _, r := range d.Repositories {
		fmt.Fprintf(w, "  %s (%s): format %d, this coffer's %d: %s", r.Name, r.Location, r.FormatVersion, r.Supported, r.State)
		if r.Error != "" {
			fmt.Fprintf(w, ": %s", r.Error)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\ndeprecated keys in use: %d\n", len(d.DeprecatedKeys))
	for _, k := range d.DeprecatedKeys {
		fmt.Fprintf(w, "  %s (%s): deprecated since %s, use %s\n", k.Key, k.File, k.Since, k.Instead)
	}
	if d.Ready {
		fmt.Fprintf(w, "\nready: nothing stands in the way\n")
	} else {
		fmt.Fprintf(w, "\nnot ready: see above\n")
	}
}
