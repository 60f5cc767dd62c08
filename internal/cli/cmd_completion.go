package cli

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/cli/complete"
)

// completionManuals are coffer's manual pages of cobra's `completion`
// command and its shells' subcommands (PowerShell's is removed: coffer
// runs on Linux).
var completionManuals = map[string]string{
	"completion": command.Manual(`Print the script that lets a shell complete coffer's commands, flags and
arguments (see the subcommands: bash, zsh, fish).

Besides commands and flags, the scripts complete the values coffer knows:
backup points by short ID (those of the catalog, as `+"`coffer catalog points`"+`
lists them), policies, connections and repositories (the configuration in
effect, as `+"`coffer config list`"+` lists them) and job IDs (as `+"`coffer jobs`"+`
lists them). With --server (COFFER_SERVER) set, they come from the
server's API, also for the commands that run on this host only. A completion that
has no answer within `+complete.DefaultTimeout.String()+` (a server that does not answer) offers
nothing rather than keep the shell waiting.`,
		"See the subcommands.",
		"coffer completion bash > ~/.local/share/bash-completion/completions/coffer",
		"0."),
	"bash": command.Manual(`Print the bash completion script. It needs the bash-completion package.
Write it to ~/.local/share/bash-completion/completions/coffer:
bash-completion loads it the first time coffer is completed. --no-descriptions leaves out
the description beside each candidate.`,
		"The script.",
		`coffer completion bash > ~/.local/share/bash-completion/completions/coffer
source <(coffer completion bash)`,
		"0."),
	"zsh": command.Manual(`Print the zsh completion script, a function named _coffer. Write it as
_coffer into a directory of $fpath before compinit runs.
--no-descriptions leaves out the description beside each candidate.`,
		"The script.",
		`coffer completion zsh > "${fpath[1]}/_coffer"`,
		"0."),
	"fish": command.Manual(`Print the fish completion script. Write it to
~/.config/fish/completions/coffer.fish: fish loads it the first time coffer
is completed. --no-descriptions leaves out the description beside each
candidate.`,
		"The script.",
		`coffer completion fish > ~/.config/fish/completions/coffer.fish`,
		"0."),
}

// documentCompletion adds cobra's completion command to root now (not
// at Execute), with coffer's manual pages, so that `coffer help`, the
// reference and the manual pages describe it.
func documentCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Long = completionManuals["completion"]
		c.Short = "print the script that completes coffer's commands and values in bash, zsh or fish"
		command.FaceOnly(c, "prints the command line's own completion script")
		for _, sub := range c.Commands() {
			long, ok := completionManuals[sub.Name()]
			if !ok {
				c.RemoveCommand(sub)
				continue
			}
			sub.Long, sub.Short = long, "print the "+sub.Name()+" completion script"
			command.FaceOnly(sub, "prints the command line's own completion script")
		}
	}
}
