package configcmd

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/config"
)

func (a *app) cmdConfig() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "inspect the configuration, and manage the objects created through the API",
		Long: command.Manual(`Inspect coffer's settings: every one can be given as a flag, an environment
variable or a key of the configuration file, with that precedence (flag >
environment > file > default). And list, create, change and delete the
configuration objects kept in the catalog (connections, repositories,
policies, notification targets and matchers, media libraries, limits,
latency-control entries, resource groups, storage snapshot providers, and
maintenance schedules and windows), which the configuration file's objects
override for the names (and the limits keys) it defines. A running server takes a change within seconds,
every server sharing the catalog too, without a restart.`,
			"See the subcommands.",
			`coffer config show
coffer config keys
coffer config create policy -f nightly.yaml`,
			"That of the subcommand."),
	}
	show := &cobra.Command{
		Use:   "show",
		Short: "print every setting and configuration object in effect, and where each came from",
		Long: command.Manual(`Print every setting with its effective value and where that came from:
a flag, the environment, the configuration file, or the default. Secrets
(passwords, S3 secret keys) show as "(set, hidden)". The configuration
file and every section of it are checked first, so a typo anywhere fails
here too.

Then the configuration objects in effect (connections, repositories,
policies, notification targets and matchers, media libraries, limits,
latency-control entries, resource groups, storage snapshot providers,
maintenance schedules and windows), each with its source: the configuration file, or the catalog (created
through the API, with its version). The file wins for the names it
defines; the catalog's objects it overrides are listed apart. Limits are
one object merged key by key: both sources may be listed, and the NOTE of
the catalog's names the keys the file sets instead. Last, the problems that make the
configuration in effect invalid, if any.`,
			`The configuration file, a table KEY, VALUE, FROM, then the objects (KIND,
NAME, SOURCE, VERSION, CHANGED, NOTE) and problems. --json: {file,
settings: [{key, value, source}], generation, objects: [{kind, name,
source, version, ..., spec, warnings}], overridden, problems}.`,
			`coffer config show
coffer --repo /srv/coffer config show --json | jq '.settings[] | select(.source != "default")'
coffer config show --json | jq '.objects[] | select(.source == "catalog") | .name'`,
			"0; 2 for a configuration file coffer refuses."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc := api.ConfigShow{Settings: []api.Setting{}}
			for _, name := range config.Names() {
				k, _ := config.Lookup(name)
				v, src := a.Res.Get(name)
				if k.Secret && v != "" {
					v = "(set, hidden)"
				}
				doc.Settings = append(doc.Settings, api.Setting{Key: name, Value: v, Source: string(src)})
			}
			// The settings are this command line's; the objects in effect
			// are the server's when it runs through one.
			eff, err := command.RunOp[*api.EffectiveConfig](cmd.Context(), a.App, "get-effective-config", &api.GetEffectiveConfigInput{})
			if err != nil {
				return err
			}
			doc.EffectiveConfig = *eff
			return a.Emit(doc, nil, func() {
				file := doc.File
				if file == "" {
					file = "(none)"
				}
				fmt.Fprintf(a.Stdout, "configuration file: %s\n", file)
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "KEY\tVALUE\tFROM")
				for _, r := range doc.Settings {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Key, r.Value, r.Source)
				}
				_ = tw.Flush()
				a.printEffective(&doc.EffectiveConfig)
			})
		},
	}
	keys := &cobra.Command{
		Use:   "keys",
		Short: "list every setting with its flag, environment variable and default",
		Long: command.Manual(`List every setting coffer knows: its key in the configuration file, its
flag and environment variable (secrets have no flag: they would show in
ps), its default and what it means; and the structured sections of the
file, each checked against its own schema.`,
			`A table FILE KEY, FLAG, ENVIRONMENT, DEFAULT, MEANING. --json: a list of
{key, flag, environment, default, usage, secret}.`,
			`coffer config keys
coffer config keys --json | jq -r '.[].environment'`,
			"0."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs := []api.ConfigKey{}
			for _, k := range config.Keys {
				d := api.ConfigKey{Key: k.Name, Environment: k.Env, Default: k.Default, Usage: k.Usage, Secret: k.Secret}
				if k.Flag != "" {
					d.Flag = "--" + k.Flag
				}
				docs = append(docs, d)
			}
			return a.Emit(docs, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "FILE KEY\tFLAG\tENVIRONMENT\tDEFAULT\tMEANING")
				for _, k := range docs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.Key, k.Flag, k.Environment, k.Default, k.Usage)
				}
				fmt.Fprintf(tw, "\nSections (each checked against its own schema when the file is read): %v\n", config.Sections)
				_ = tw.Flush()
			})
		},
	}
	cmd.AddCommand(command.RemoteToo(command.Op(show, "get-effective-config")), command.RemoteToo(command.FaceOnly(keys, "lists the command line's own settings")))
	for _, c := range a.configObjectCommands() {
		cmd.AddCommand(command.RemoteToo(c))
	}
	return cmd
}
