package reposervercmd

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/reposerver"
)

const faceOnlyWhy = "edits the repository server's credentials file on the storage host"

func (a *app) cmdCredential() *cobra.Command {
	var file string
	cmd := command.FaceOnly(&cobra.Command{
		Use:   "credential",
		Short: "manage the credentials of a repository server's clients",
		Long: command.Manual(`Each client of a repository server (a coffer server or worker) has a
credential of its own, with one right: read, append or maintain. The
server keeps only each secret's SHA-256, in its credentials file; it
rereads the file on SIGHUP.`, "See the subcommands.", "coffer repository credential list --credentials /etc/coffer/repository-credentials.yaml", "0."),
	}, faceOnlyWhy)
	cmd.PersistentFlags().StringVar(&file, "credentials", "", "the server's credentials file (required)")
	_ = cmd.MarkPersistentFlagRequired("credentials")

	var right string
	add := command.FaceOnly(&cobra.Command{
		Use:   "add NAME",
		Short: "add a client's credential and print its secret, once",
		Long: command.Manual(`Add a credential for the client NAME with one right (--right read, append
or maintain), and print its secret. The secret is shown this once and
stored nowhere: give it to the client as its --repo-credential-file.`,
			"The secret, or with --json {name, right, secret}.",
			"coffer repository credential add kvm7-worker --right append --credentials /etc/coffer/repository-credentials.yaml", "0; 2 for a name that exists or an unknown right."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := reposerver.ParseRight(right)
			if err != nil {
				return api.WithClass(api.Invalid, err)
			}
			secret, err := reposerver.AddCredential(file, args[0], r)
			if err != nil {
				return api.WithClass(api.Invalid, err)
			}
			if a.JSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]string{"name": args[0], "right": string(r), "secret": secret})
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), secret)
			return err
		},
	}, faceOnlyWhy)
	add.Flags().StringVar(&right, "right", "append", "read, append or maintain")

	remove := command.FaceOnly(&cobra.Command{
		Use:   "remove NAME",
		Short: "remove a client's credential",
		Long: command.Manual(`Remove the credential of the client NAME. A running server refuses it once
it rereads the file (SIGHUP, or a restart).`, "Nothing.",
			"coffer repository credential remove kvm7-worker --credentials /etc/coffer/repository-credentials.yaml", "0; 2 for no such credential."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := reposerver.RemoveCredential(file, args[0]); err != nil {
				return api.WithClass(api.Invalid, err)
			}
			return nil
		},
	}, faceOnlyWhy)

	list := command.FaceOnly(&cobra.Command{
		Use:   "list",
		Short: "list the clients' credentials: name and right",
		Long: command.Manual(`List the credentials in the file: each client's name and right (never a
secret or its hash).`, "One line per credential, or with --json a list of {name, right}.",
			"coffer repository credential list --credentials /etc/coffer/repository-credentials.yaml", "0."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			creds, err := reposerver.LoadCredentials(file)
			if err != nil {
				return api.WithClass(api.Invalid, err)
			}
			type view struct {
				Name  string `json:"name"`
				Right string `json:"right"`
			}
			out := []view{}
			for _, c := range creds {
				out = append(out, view{c.Name, string(c.Right)})
			}
			if a.JSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(out)
			}
			for _, v := range out {
				fmt.Fprintf(cmd.OutOrStdout(), "%-24s %s\n", v.Name, v.Right)
			}
			return nil
		},
	}, faceOnlyWhy)
	cmd.AddCommand(add, remove, list)
	return cmd
}
