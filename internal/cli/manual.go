package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// manual builds a command's manual page (its Long text, shown by `coffer
// help COMMAND`): what it does, what it prints, examples, and its exit
// status. Every command has one; TestEveryCommandHasAManualPage holds
// them to it.
func manual(description, output, examples, exit string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(description))
	section := func(title, body string) {
		b.WriteString("\n\n" + title + "\n")
		for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
			if line == "" {
				b.WriteString("\n")
				continue
			}
			b.WriteString("    " + line + "\n")
		}
	}
	section("OUTPUT", output)
	section("EXAMPLES", examples)
	section("EXIT STATUS", exit+"\nSee `coffer exit-codes` for every code.")
	return strings.TrimRight(b.String(), "\n")
}

// Annotations of commands, read by the tests that hold the command line
// to the service's operations.
const (
	// annotationOperations names the service operations a command runs
	// (internal/service.Operations), space-separated.
	annotationOperations = "operations"
	// annotationFaceOnly says why a command runs no operation of the
	// service (it is the command line's own business).
	annotationFaceOnly = "face-only"
)

// op declares the service operations cmd runs.
func op(cmd *cobra.Command, ids ...string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationOperations] = strings.Join(ids, " ")
	return cmd
}

// faceOnly declares that cmd runs no operation of the service, and why.
func faceOnly(cmd *cobra.Command, why string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationFaceOnly] = why
	return cmd
}

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
	a := &app{}
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
		out[path] = CommandInfo{Operations: strings.Fields(c.Annotations[annotationOperations]), FaceOnly: c.Annotations[annotationFaceOnly]}
	}
	walk(a.newRoot())
	return out
}
