package repocmd

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdKey() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "manage the repository's keys (passwords)",
		Long: command.Manual(`A repository has one master key, stored once per password in key files.
Adding a key lets a second password (a second operator, an offsite copy
job) open the repository; removing one revokes it. The last key cannot be
removed, nor the key in use (whose password opened the repository: a
server's own), nor a key that opens points under object lock while they
are locked.`,
			"See the subcommands.",
			`coffer key list
coffer key add --label offsite --new-password-file /etc/coffer/offsite.pw
coffer key remove 9c1e4a02`,
			"That of the subcommand."),
	}
	var newPwFile, label string
	add := &cobra.Command{
		Use:   "add",
		Short: "add a password",
		Long: command.Manual(`Add a password. The new password is read from --new-password-file, or from
the first line of standard input, or prompted for (twice) on a terminal.
The repository itself is opened with the current password.`,
			`"added key ID". --json: the key document {id, label, user, host,
created, current}.`,
			`coffer key add --label offsite --new-password-file /etc/coffer/offsite.pw
echo "$NEW_PASSWORD" | coffer key add --label backup-operator`,
			"0; 2 for an empty new password; 3 for a wrong current password."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The current password first: a prompt for it comes before
			// the one for the new password (a server opens the
			// repository with its own).
			if a.Remote == nil {
				if _, err := a.Service(); err != nil {
					return err
				}
				if _, err := a.RepositoryPassword(); err != nil {
					return err
				}
			}
			var pw string
			switch {
			case newPwFile != "":
				b, err := os.ReadFile(newPwFile)
				if err != nil {
					return command.Usagef("new password file: %v", err)
				}
				pw = strings.TrimRight(string(b), "\r\n")
			default:
				if f, ok := a.Stdin.(*os.File); ok && a.isTerminal(f) {
					b, err := a.Prompt(f, true)
					if err != nil {
						return err
					}
					pw = string(b)
				} else {
					var err error
					if pw, err = a.ReadLine(); err != nil {
						return command.Usagef("read the new password from stdin: %v", err)
					}
				}
			}
			k, err := command.RunOp[*api.Key](cmd.Context(), a.App, "add-key", &api.AddKeyInput{Body: api.AddKeyRequest{Password: pw, Label: label}})
			if err != nil {
				return err
			}
			return a.Emit(k, nil, func() { a.Printf("added key %s\n", command.Short(k.ID)) })
		},
	}
	add.Flags().StringVar(&newPwFile, "new-password-file", "", "file holding the new password")
	add.Flags().StringVar(&label, "label", "", "a note about the key (who holds it)")

	list := &cobra.Command{
		Use:   "list",
		Short: "list keys",
		Long: command.Manual(`List the repository's keys: one per password that opens it. The key the
password given opened the repository with is marked.`,
			`A table: the current key marked "*", ID, LABEL, USER, HOST, CREATED.
--json: a list of {id, label, user, host, created, current}.`,
			`coffer key list
coffer key list --json | jq -r '.[] | select(.current | not) | .id'`,
			"0; 3 for a wrong password."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := command.RunOp[[]api.Key](cmd.Context(), a.App, "list-keys", &api.RepoParam{})
			if err != nil {
				return err
			}
			return a.Emit(keys, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, " \tID\tLABEL\tUSER\tHOST\tCREATED")
				for _, k := range keys {
					cur := " "
					if k.Current {
						cur = "*"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cur, command.Short(k.ID), k.Label, k.User, k.Host, k.Created.Local().Format("2006-01-02 15:04"))
				}
				_ = tw.Flush()
			})
		},
	}
	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "remove a key (not the last key, nor the key in use)",
		Long: command.Manual(`Remove a key (by ID or unique prefix): its password no longer opens the
repository. The last key cannot be removed, nor the key in use: the one
whose password opened the repository (through a server, the server's own
key), which would lock its user, or the server and all its schedules,
out at the next open; add another key and open with it first. Nor, on
storage with object lock, a key that opens locked points before their
lock ends (it says until when).`,
			`"removed key ID". --json: {removed}.`,
			"coffer key remove 9c1e4a02",
			"0; 7 for an unknown key; 2 (refused) for the last key, the key in use or a key locked points need."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := command.RunOp[*api.KeyRemoval](cmd.Context(), a.App, "remove-key", &api.RemoveKeyInput{Key: args[0]})
			if err != nil {
				return err
			}
			return a.Emit(res, nil, func() { a.Printf("removed key %s\n", command.Short(res.Removed)) })
		},
	}
	cmd.AddCommand(command.RemoteToo(command.Op(add, "add-key")), command.RemoteToo(command.Op(list, "list-keys")), command.RemoteToo(command.Op(remove, "remove-key")))
	return cmd
}

func (a *app) isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
