package command

import (
	"strings"

	"github.com/spf13/cobra"
)

// Manual builds a command's manual page (its Long text, shown by `coffer
// help COMMAND`): what it does, what it prints, examples, and its exit
// status. Every command has one; TestEveryCommandHasAManualPage holds
// them to it.
func Manual(description, output, examples, exit string) string {
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
	// AnnotationOperations names the service operations a command runs
	// (internal/operations.All), space-separated.
	AnnotationOperations = "operations"
	// AnnotationFaceOnly says why a command runs no operation of the
	// service (it is the command line's own business).
	AnnotationFaceOnly = "face-only"
)

// Op declares the service operations cmd runs.
func Op(cmd *cobra.Command, ids ...string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[AnnotationOperations] = strings.Join(ids, " ")
	return cmd
}

// FaceOnly declares that cmd runs no operation of the service, and why.
func FaceOnly(cmd *cobra.Command, why string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[AnnotationFaceOnly] = why
	return cmd
}
