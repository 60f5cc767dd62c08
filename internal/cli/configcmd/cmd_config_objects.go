package configcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/configobj"
	"github.com/coffer-backup/coffer/internal/service/configops"
)

// configOps are the operation IDs of one verb on every kind of
// configuration object: the commands below run whichever the KIND
// argument names.
func configOps(verb string) []string {
	var out []string
	for _, k := range configobj.Kinds {
		out = append(out, configops.ConfigOperationID(verb, k))
	}
	return out
}

const kindsHelp = `KIND is connection, repository, policy, notification-target,
notification-matcher, media-library, replication, failover-plan, limits, latency-control, resource-group,
storage-snapshot-provider, maintenance-schedule (an entry of the maintenance
section's repositories, named by its repository: its gc, verify, forget,
copy and media-copy jobs) or maintenance-window (or its plural). There is one limits object,
named default, merged with the file's limits key by key: the file's keys
win, and ` + "`config get limits default`" + ` warns of each key the file sets too.`

// configObjectCommands are `coffer config list/get/create/update/delete`.
func (a *app) configObjectCommands() []*cobra.Command {
	list := &cobra.Command{
		Use:   "list [KIND]",
		Short: "list the configuration objects in effect, with where each is defined",
		Long: command.Manual(`List the connections, repositories, policies, notification targets and
matchers, media libraries, the engine's settings (limits, latency-control
entries, resource groups, storage snapshot providers) and the maintenance
schedules and windows in effect: those of
the configuration file and those created
through the API (stored in the catalog), each with its source, and the
catalog's objects the file overrides (the file wins for the names it
defines). `+kindsHelp,
			`A table KIND, NAME, SOURCE (file or catalog), VERSION, CHANGED (by whom
and when), NOTE. --json: a list of {kind, name, source, version,
created_at, created_by, updated_at, updated_by, overridden, spec,
warnings}.`,
			`coffer config list
coffer config list policies --json`,
			"0; 2 for an unknown kind."),
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind := ""
			if len(args) == 1 {
				kind = args[0]
			}
			docs, err := a.listObjects(cmd.Context(), kind)
			if err != nil {
				return err
			}
			return a.Emit(docs, nil, func() { a.printObjects(docs) })
		},
	}
	get := &cobra.Command{
		Use:   "get KIND NAME",
		Short: "print a configuration object as an entry of the configuration file",
		Long: command.Manual(`Print one configuration object in effect, in the configuration file's
schema (what `+"`config create`"+` and `+"`config update`"+` take, and what the
file's section holds), with its source and version. `+kindsHelp,
			`A comment line with the source, version and last change, then the
object as YAML. --json: {kind, name, source, version, ..., spec,
warnings}.`,
			`coffer config get policy nightly
coffer config get policy nightly > nightly.yaml   # edit, then config update`,
			"0; 2 for an unknown kind; 7 when there is no such object."),
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := objectOp("get", args[0])
			if err != nil {
				return err
			}
			doc, err := command.RunOp[*api.ConfigObject](cmd.Context(), a.App, id, &api.GetConfigObjectInput{ConfigNameParam: api.ConfigNameParam{Name: args[1]}})
			if err != nil {
				return err
			}
			return a.Emit(doc, nil, func() { a.printObject(doc) })
		},
	}
	var file string
	var ifVersion int64
	create := &cobra.Command{
		Use:   "create KIND -f FILE",
		Short: "create a configuration object in the catalog",
		Long: command.Manual(`Create a configuration object in the catalog, where every coffer sharing
it (and a running server, within seconds) sees it. FILE ("-": standard
input) holds the object as YAML or JSON, written exactly like an entry of
its section of the configuration file. It is checked like the file
(unknown keys, references, what the connections can do) against the
whole configuration it would make, and refused with the same messages.
Names the configuration file defines are the file's: change them there.
Secrets are never written in an object: name the files that hold them
(password-file, secret-file). The change is recorded in the audit log. `+kindsHelp,
			`The object as created, as `+"`config get`"+` prints it. --json: its document.`,
			`coffer config create policy -f nightly.yaml
echo '{name: lab, kind: qemu, options: {sockets: ["/run/coffer/*.qmp"]}}' | coffer config create connection -f -`,
			`0; 2 for an object or configuration the checks refuse, a name the
configuration file defines, or one that exists.`),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := a.readSpec(file)
			if err != nil {
				return err
			}
			id, err := objectOp(configobj.Create, args[0])
			if err != nil {
				return err
			}
			doc, err := command.RunOp[*api.ConfigObject](cmd.Context(), a.App, id, &api.CreateConfigObjectInput{Body: spec})
			if err != nil {
				return err
			}
			return a.Emit(doc, nil, func() { a.printObject(doc) })
		},
	}
	create.Flags().StringVarP(&file, "file", "f", "", `the object, as YAML or JSON ("-": standard input)`)
	update := &cobra.Command{
		Use:   "update KIND NAME -f FILE",
		Short: "replace a configuration object of the catalog",
		Long: command.Manual(`Replace a configuration object created through the API with the one in
FILE (the whole object: keys left out take their defaults), checked as
`+"`config create`"+` checks. --if-version refuses the change if the object was
changed since that version (what `+"`config get`"+` showed): the change is made
on what you read, or not at all. Objects of the configuration file are
changed in the file. `+kindsHelp,
			`The object as changed. --json: its document.`,
			`coffer config get policy nightly > nightly.yaml && $EDITOR nightly.yaml
coffer config update policy nightly -f nightly.yaml --if-version 12`,
			`0; 2 when the checks refuse it, the file defines it, or it changed since
--if-version; 7 when there is no such object in the catalog.`),
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := a.readSpec(file)
			if err != nil {
				return err
			}
			id, err := objectOp(configobj.Update, args[0])
			if err != nil {
				return err
			}
			doc, err := command.RunOp[*api.ConfigObject](cmd.Context(), a.App, id, &api.UpdateConfigObjectInput{ConfigNameParam: api.ConfigNameParam{Name: args[1]},
				IfMatchParam: api.IfVersion(ifVersion), Body: spec})
			if err != nil {
				return err
			}
			return a.Emit(doc, nil, func() { a.printObject(doc) })
		},
	}
	update.Flags().StringVarP(&file, "file", "f", "", `the object, as YAML or JSON ("-": standard input)`)
	update.Flags().Int64Var(&ifVersion, "if-version", 0, "refuse the change if the object is no longer at this version")
	del := &cobra.Command{
		Use:   "delete KIND NAME",
		Short: "delete a configuration object of the catalog",
		Long: command.Manual(`Delete a configuration object created through the API. One that others
use (a connection or repository of a policy, a target of a matcher) is
refused, naming them. Deleting a policy or repository leaves its jobs
and backup points; a catalog object the configuration file overrides
can be deleted (the file's stays in effect). `+kindsHelp,
			`"deleted KIND NAME (version N)". --json: the object as it was.`,
			`coffer config delete policy old-nightly
coffer config delete connection lab --if-version 3`,
			`0; 2 when something uses it, the file defines it, or it changed since
--if-version; 7 when there is no such object in the catalog.`),
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := objectOp(configobj.Delete, args[0])
			if err != nil {
				return err
			}
			doc, err := command.RunOp[*api.ConfigObject](cmd.Context(), a.App, id, &api.DeleteConfigObjectInput{ConfigNameParam: api.ConfigNameParam{Name: args[1]},
				IfMatchParam: api.IfVersion(ifVersion)})
			if err != nil {
				return err
			}
			return a.Emit(doc, nil, func() { a.Printf("deleted %s %s (version %d)\n", doc.Kind, doc.Name, doc.Version) })
		},
	}
	del.Flags().Int64Var(&ifVersion, "if-version", 0, "refuse to delete the object if it is no longer at this version")
	return []*cobra.Command{command.Op(list, configOps("list")...), command.Op(get, configOps("get")...), command.Op(create, configOps(configobj.Create)...),
		command.Op(update, configOps(configobj.Update)...), command.Op(del, configOps(configobj.Delete)...), a.testTargetCommand()}
}

// objectOp is the ID of a verb's operation on the objects of a kind (in
// the singular or plural).
func objectOp(verb, kind string) (string, error) {
	k, err := configobj.ParseKind(kind)
	if err != nil {
		return "", err
	}
	return configops.ConfigOperationID(verb, k), nil
}

// listObjects lists the objects of a kind ("": every kind, those in
// effect first, then those the file overrides), here or through a
// server. Every kind is listed with its own operation, each showing what
// the caller may see of it: through a server, kinds the token may see
// nothing of are left out.
func (a *app) listObjects(ctx context.Context, kind string) ([]api.ConfigObject, error) {
	if kind != "" {
		id, err := objectOp("list", kind)
		if err != nil {
			return nil, err
		}
		return command.RunOp[[]api.ConfigObject](ctx, a.App, id, &api.ListConfigObjectsInput{})
	}
	var inEffect, overridden []api.ConfigObject
	var denied error
	for _, k := range configobj.Kinds {
		docs, err := command.RunOp[[]api.ConfigObject](ctx, a.App, configops.ConfigOperationID("list", k), &api.ListConfigObjectsInput{})
		if c, _ := api.ClassOf(err); c == api.Denied {
			denied = err
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			if d.Overridden {
				overridden = append(overridden, d)
			} else {
				inEffect = append(inEffect, d)
			}
		}
	}
	if len(inEffect)+len(overridden) == 0 && denied != nil {
		return nil, denied
	}
	return append(append([]api.ConfigObject{}, inEffect...), overridden...), nil
}

// readSpec reads an object from a file ("-": standard input).
func (a *app) readSpec(path string) (map[string]any, error) {
	if path == "" {
		return nil, command.Usagef("give the object with -f FILE (YAML or JSON, written like an entry of the configuration file; - for standard input)")
	}
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(a.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, command.Usagef("%v", err)
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return nil, command.Usagef("%s: %v", path, err)
	}
	if len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode {
		return nil, command.Usagef("%s must hold one object (a mapping like name: ..., as one entry of a section of the configuration file)", path)
	}
	var spec map[string]any
	if err := n.Decode(&spec); err != nil {
		return nil, command.Usagef("%s: %v", path, err)
	}
	return spec, nil
}

func (a *app) printObjects(docs []api.ConfigObject) {
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tSOURCE\tVERSION\tCHANGED\tNOTE")
	for _, d := range docs {
		version, changed := "-", "-"
		if d.Source == "catalog" {
			version = fmt.Sprint(d.Version)
			changed = d.UpdatedBy + " " + d.UpdatedAt.Local().Format("2006-01-02 15:04")
		}
		var note []string
		if d.Overridden {
			note = append(note, "overridden by the file: not in effect")
		}
		if len(d.FileKeys) > 0 {
			note = append(note, "the file's "+strings.Join(d.FileKeys, ", ")+" in effect instead")
		}
		switch n := len(d.Warnings) - len(d.FileKeys); {
		case n == 1:
			note = append(note, "1 warning (config get)")
		case n > 1:
			note = append(note, fmt.Sprintf("%d warnings (config get)", n))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Kind, d.Name, d.Source, version, changed, strings.Join(note, "; "))
	}
	_ = tw.Flush()
}

func (a *app) printObject(d *api.ConfigObject) {
	switch {
	case d.Source == "file":
		a.Printf("# %s %s: defined in the configuration file\n", d.Kind, d.Name)
	default:
		a.Printf("# %s %s: catalog, version %d, created by %s at %s, changed by %s at %s\n", d.Kind, d.Name, d.Version,
			d.CreatedBy, d.CreatedAt.Local().Format("2006-01-02 15:04:05"), d.UpdatedBy, d.UpdatedAt.Local().Format("2006-01-02 15:04:05"))
	}
	if d.Overridden {
		a.Printf("# overridden by the configuration file's %s %s: not in effect\n", d.Kind, d.Name)
	}
	for _, w := range d.Warnings {
		a.Printf("# warning: %s\n", w)
	}
	b, err := yaml.Marshal(d.Spec)
	if err == nil {
		a.Printf("%s", b)
	}
}

// printEffective prints the objects in effect and the problems of the
// configuration (config show).
func (a *app) printEffective(doc *api.EffectiveConfig) {
	a.Printf("\nconfiguration objects in effect (catalog generation %d):\n", doc.Generation)
	if len(doc.Objects) == 0 {
		a.Printf("  none\n")
	} else {
		a.printObjects(doc.Objects)
	}
	if len(doc.Overridden) > 0 {
		a.Printf("\nobjects of the catalog the file overrides (not in effect; delete them with `coffer config delete`):\n")
		a.printObjects(doc.Overridden)
	}
	for _, p := range doc.Problems {
		a.Printf("problem: %s\n", p)
	}
}
