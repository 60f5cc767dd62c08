package configcmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// testTargetCommand is `coffer config test-target NAME`: a test message
// to one notification target, to check it before an alert depends on it.
func (a *app) testTargetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "test-target NAME",
		Short: "send a test message to a notification target",
		Long: command.Manual(`Send a test message to the notification target NAME of the configuration
in effect (the file's or one created through the API, enabled or not),
now, and say whether the mail server or webhook accepted it. Nothing is
recorded as a delivery and no matcher is consulted.`,
			`"sent a test message to TARGET (KIND)". --json: {target, kind, sent_at}.`,
			`coffer config test-target ops-mail`,
			`0; 2 when the target did not accept the message (the reason is printed);
7 when there is no such target.`),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := api.TestNotificationTargetInput{ConfigNameParam: api.ConfigNameParam{Name: args[0]}}
			doc, err := command.RunOp[*api.NotificationTest](cmd.Context(), a.App, "test-notification-target", &in)
			if err != nil {
				return err
			}
			return a.Emit(doc, nil, func() { fmt.Fprintf(a.Stdout, "sent a test message to %s (%s)\n", doc.Target, doc.Kind) })
		},
	}
	return command.RemoteToo(command.Op(cmd, "test-notification-target"))
}
