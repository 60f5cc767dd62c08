package cli

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func (a *app) cmdKey() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "manage the repository's keys (passwords)",
		Long: `A repository has one master key, stored once per password in key files.
Adding a key lets a second password (a second operator, an offsite copy
job) open the repository; removing one revokes it. The last key cannot be
removed.`,
	}
	var newPwFile, label string
	add := &cobra.Command{
		Use:   "add",
		Short: "add a password",
		Long: `Add a password. The new password is read from --new-password-file, or from
the first line of standard input, or prompted for on a terminal.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			r, err := a.openRepo(ctx)
			if err != nil {
				return err
			}
			var pw string
			switch {
			case newPwFile != "":
				b, err := os.ReadFile(newPwFile)
				if err != nil {
					return usagef("new password file: %v", err)
				}
				pw = strings.TrimRight(string(b), "\r\n")
			default:
				if f, ok := a.stdin.(*os.File); ok && a.isTerminal(f) {
					b, err := a.prompt(f, true)
					if err != nil {
						return err
					}
					pw = string(b)
				} else if pw, err = a.readLine(); err != nil {
					return usagef("read the new password from stdin: %v", err)
				}
			}
			if pw == "" {
				return usagef("the new password is empty")
			}
			kf, err := r.AddKey(ctx, []byte(pw), label)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(map[string]string{"id": kf.ID, "label": kf.Label})
			}
			a.printf("added key %s\n", kf.ID[:8])
			return nil
		},
	}
	add.Flags().StringVar(&newPwFile, "new-password-file", "", "file holding the new password")
	add.Flags().StringVar(&label, "label", "", "a note about the key (who holds it)")

	list := &cobra.Command{
		Use:   "list",
		Short: "list keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			r, err := a.openRepo(ctx)
			if err != nil {
				return err
			}
			keys, err := r.Keys(ctx)
			if err != nil {
				return err
			}
			if a.jsonOut {
				type view struct {
					ID, Label, Host, User, Created string
					Current                        bool
				}
				var out []view
				for _, k := range keys {
					out = append(out, view{k.ID, k.Label, k.Host, k.User, k.Created.Format("2006-01-02T15:04:05Z07:00"), k.ID == r.CurrentKeyID()})
				}
				return a.printJSON(out)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, " \tID\tLABEL\tUSER\tHOST\tCREATED")
			for _, k := range keys {
				cur := " "
				if k.ID == r.CurrentKeyID() {
					cur = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cur, k.ID[:8], k.Label, k.User, k.Host, k.Created.Local().Format("2006-01-02 15:04"))
			}
			return tw.Flush()
		},
	}
	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "remove a key (the last key cannot be removed)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			r, err := a.openRepo(ctx)
			if err != nil {
				return err
			}
			removed, err := r.RemoveKey(ctx, args[0])
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(map[string]string{"removed": removed})
			}
			a.printf("removed key %s\n", removed[:8])
			return nil
		},
	}
	cmd.AddCommand(add, list, remove)
	return cmd
}

func (a *app) isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
