package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/version"
)

// cmdVersion prints which coffer this is, for people and (with --json)
// for scripts and bug reports.
func (a *app) cmdVersion() *cobra.Command {
	return command.FaceOnly(&cobra.Command{
		Use:   "version",
		Short: "print coffer's version, commit and Go toolchain",
		Long: command.Manual(`Print the version of this coffer binary: its release tag, or for an
untagged build how far it is from the last tag (v0.1.0-3-g1a2b3c4d5e6f),
the commit it was built from, the Go toolchain, and the compressor it
was built with (cgo's zstd or pure Go), which decides backup speed.`,
			"One line, or with --json an object: version, revision, goversion, compression.",
			"coffer version --json", "0."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := struct {
				version.Info
				Compression string `json:"compression"`
			}{version.Get(), repo.Compressor}
			if a.JSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "coffer %s (commit %s, %s, compression: %s)\n",
				info.Version, info.Revision, info.GoVersion, info.Compression)
			return err
		},
	}, "reads only the binary's own build information")
}
