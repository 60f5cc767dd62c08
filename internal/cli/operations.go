package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/cli/command"
)

// CommandInfo is what a command declares about the service operations it
// runs.
type CommandInfo struct {
	Operations []string
	// FaceOnly says why the command runs none ("" when it runs some).
	FaceOnly string
}

// CommandOperations maps every runnable command ("files get") to the
// service operations it runs, so that a test can hold the command line and
// the other faces to the same operations.
func CommandOperations() map[string]CommandInfo {
	a := newApp(&command.App{})
	out := map[string]CommandInfo{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || c == a.root {
			return
		}
		path := strings.TrimPrefix(c.CommandPath(), "coffer ")
		out[path] = CommandInfo{Operations: strings.Fields(c.Annotations[command.AnnotationOperations]), FaceOnly: c.Annotations[command.AnnotationFaceOnly]}
	}
	walk(a.newRoot())
	return out
}
