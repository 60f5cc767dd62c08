package cli

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/cli/manpage"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/version"
)

// configFileIntro describes the configuration file, in coffer.yaml(5).
const configFileIntro = `coffer's configuration file is YAML, looked up at --config, then
$COFFER_CONFIG, then ~/.config/coffer/config.yaml
($XDG_CONFIG_HOME/coffer/config.yaml), then /etc/coffer/coffer.yaml.

Every setting below can be given as a flag, an environment variable or a
key of the file, with that precedence: flag > environment > file >
default. ` + "`coffer config keys`" + ` lists them; ` + "`coffer config show`" + ` shows the value
of each in effect and where it came from. A dotted key nests: s3.endpoint
is endpoint: under s3:.

Unknown keys are errors, at the top level and in every section, whatever
the command (exit code 2), so that a typo never falls back to a default.`

// cmdGenerateMan is `coffer generate man --dir DIR`, which the packages
// run to ship the manual pages.
func (a *app) cmdGenerateMan() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use: "man --dir DIR", Short: "write the manual pages: one per command, and coffer.yaml(5)",
		Long: command.Manual(`Write coffer's manual pages into DIR: coffer.1 and one page per command
(coffer-config-keys.1 for `+"`coffer config keys`"+`), rendered from the same
manual texts as `+"`coffer help COMMAND`"+` and docs/reference/commands; and
coffer.yaml.5, the configuration file's settings as `+"`coffer config keys`"+`
lists them. The pages carry no date: they depend on the code only.`,
			"The files it wrote, one per line.",
			`coffer generate man --dir /tmp/man && man -l /tmp/man/coffer-restore.1`,
			"0 on success; 1 when DIR cannot be written."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			written, err := GenerateMan(dir)
			for _, f := range written {
				a.Printf("%s\n", f)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the directory to write the pages into (created if missing)")
	_ = cmd.MarkFlagRequired("dir")
	return command.FaceOnly(cmd, "writes the command line's own manual pages")
}

// GenerateMan writes the manual pages into dir and returns their names.
func GenerateMan(dir string) ([]string, error) {
	written, err := manual().WriteTree(manualRoot(), dir)
	if err != nil {
		return written, err
	}
	return append(written, manpage.ConfigFileName), writeFile(dir, manpage.ConfigFileName, configManPage())
}

func manual() manpage.Manual { return manpage.Manual{Source: "coffer " + version.Get().Version} }

// manualRoot is the command tree the manual pages and the reference
// describe.
func manualRoot() *cobra.Command {
	root := newApp(&command.App{}).newRoot()
	root.DisableAutoGenTag = true
	return root
}

// configManPage is coffer.yaml(5).
func configManPage() []byte {
	return manual().ConfigPage(config.Keys, config.Sections, configFileIntro)
}

func writeFile(dir, name string, data []byte) error {
	return os.WriteFile(filepath.Join(dir, name), data, 0o644)
}
