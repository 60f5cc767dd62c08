package command

import (
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Completing is a fresh App for one shell completion of cmd, whose flags
// cobra has parsed: set up from them, the environment and the
// configuration file at configPath, as cmd would be, but silent (nothing
// on the terminal the shell completes on), never prompting for a password,
// and reaching the server (--server, COFFER_SERVER) even for a command
// that only runs on this host, since it only lists what the server has.
// Its Close is the caller's, once the listing ended.
func Completing(cmd *cobra.Command, configPath string) (*App, error) {
	a := &App{Stdout: io.Discard, Stderr: io.Discard, Stdin: strings.NewReader(""), completing: true}
	return a, a.Setup(cmd, configPath)
}
