package servercmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// A user's second factors from the command line: what is enrolled, TOTP
// enrolment and removal, new recovery codes. Security keys (WebAuthn)
// need a browser: the console's Account page enrols them; here they are
// listed and removed.

func (a *app) cmdAccount() *cobra.Command {
	cmd := &cobra.Command{Use: "account", Short: "a user's second factors: TOTP, security keys, recovery codes",
		Long: command.Manual(`Manage a user's second factors. Users whose roles are named by
server.require-second-factor (Admin and RepositoryAdmin unless it says
otherwise) sign in to the console with their password and then a second
factor: a TOTP app, a security key or passkey, or a one-time recovery
code. API tokens need none. Each user enrols their own; an administrator
(Perm.Modify on /access) removes a lost one.`,
			"See the subcommands.", "coffer account show alice\ncoffer account totp enrol alice", "That of the subcommand.")}
	show := command.RemoteToo(command.Op(&cobra.Command{Use: "show USER", Short: "show what second factors a user has",
		Long: command.Manual(`Show a user's second factors: TOTP, security keys, the recovery codes
left, and whether the user's roles require one (one's own, or anyone's
with Sys.Audit on /access).`,
			"Lines of text. --json: the second-factors document.", "coffer account show alice", "0; 7 for an unknown user."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := command.RunOp[*api.SecondFactors](cmd.Context(), a.App, "second-factors", &api.UserParam{User: args[0]})
			if err != nil {
				return err
			}
			return a.Emit(st, nil, func() { a.Printf("%s", factorsText(st)) })
		}}, "second-factors"))
	codes := command.RemoteToo(command.Op(&cobra.Command{Use: "recovery-codes USER", Short: "replace a user's recovery codes (shown once)",
		Long: command.Manual(`Make ten new recovery codes for a user who has a second factor; the old
ones stop working. Each replaces the second factor once. Through a
server it needs the user's signed-in session, or Perm.Modify on /access.`,
			"The codes, one a line. --json: {user, codes}.", "coffer account recovery-codes alice", "0; 2 when the user has no second factor."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rc, err := command.RunOp[*api.RecoveryCodes](cmd.Context(), a.App, "regenerate-recovery-codes", &api.UserParam{User: args[0]})
			if err != nil {
				return err
			}
			return a.Emit(rc, nil, func() { a.Printf("%s", codesText(rc)) })
		}}, "regenerate-recovery-codes"))
	cmd.AddCommand(show, a.cmdAccountTOTP(), a.cmdAccountKey(), codes)
	return cmd
}

func (a *app) cmdAccountTOTP() *cobra.Command {
	cmd := &cobra.Command{Use: "totp", Short: "enrol, confirm or remove a user's TOTP app",
		Long: command.Manual(`Enrol a TOTP app (RFC 6238: six digits every 30 seconds) for a user,
confirm it with its first code, or remove it.`, "See the subcommands.",
			"coffer account totp enrol alice\ncoffer account totp confirm alice 123456", "That of the subcommand.")}
	enrol := command.RemoteToo(command.Op(&cobra.Command{Use: "enrol USER", Short: "start a TOTP enrolment (the seed is shown once)",
		Long: command.Manual(`Start a TOTP enrolment: print the seed and its otpauth:// URI for an
authenticator app, then confirm with the app's first code (coffer account
totp confirm). Each user enrols their own (on the server's host, the
local administrator may enrol anyone's). A user with a TOTP removes it
first.`,
			"The otpauth URI and the seed. --json: {user, secret, uri, qr_code_png}.", "coffer account totp enrol alice",
			"0; 2 when the user has a TOTP already; 3 for another's."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			en, err := command.RunOp[*api.TOTPEnrolment](cmd.Context(), a.App, "enrol-totp", &api.EnrolTOTPInput{UserParam: api.UserParam{User: args[0]}})
			if err != nil {
				return err
			}
			return a.Emit(en, nil, func() {
				a.Printf("Add this to the authenticator app of %s (or type the seed), then run coffer account totp confirm %s CODE:\n  %s\n  seed: %s\n",
					en.User, en.User, en.URI, en.Secret)
			})
		}}, "enrol-totp"))
	confirm := command.RemoteToo(command.Op(&cobra.Command{Use: "confirm USER CODE", Short: "complete a TOTP enrolment with the app's code",
		Long: command.Manual(`Complete a TOTP enrolment with the code the app shows now, and print
the user's ten recovery codes: keep them apart from the phone. Wrong
codes are throttled as wrong passwords are.`,
			"The recovery codes, one a line. --json: {user, codes}.", "coffer account totp confirm alice 123456",
			"0; 3 for a wrong code; 2 when no enrolment waits."),
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := api.ConfirmTOTPInput{UserParam: api.UserParam{User: args[0]}, Body: api.CodeRequest{Code: args[1]}}
			rc, err := command.RunOp[*api.RecoveryCodes](cmd.Context(), a.App, "confirm-totp", &in)
			if err != nil {
				return err
			}
			return a.Emit(rc, nil, func() { a.Printf("TOTP of %s confirmed.\n%s", rc.User, codesText(rc)) })
		}}, "confirm-totp"))
	remove := command.RemoteToo(command.Op(&cobra.Command{Use: "remove USER", Short: "remove a user's TOTP",
		Long: command.Manual(`Remove a user's TOTP: for a user who lost the phone (an administrator,
with Perm.Modify on /access), or one's own in a signed-in session. A user
whose roles require a second factor is asked to enrol one at the next
sign-in.`, `"TOTP of USER removed".`, "coffer account totp remove alice", "0; 7 when the user has no TOTP; 3 when refused."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := command.RunOp[struct{}](cmd.Context(), a.App, "remove-totp", &api.UserParam{User: args[0]})
			if err == nil {
				a.Printf("TOTP of %s removed\n", args[0])
			}
			return err
		}}, "remove-totp"))
	cmd.AddCommand(enrol, confirm, remove)
	return cmd
}

func (a *app) cmdAccountKey() *cobra.Command {
	cmd := &cobra.Command{Use: "key", Short: "list or remove a user's security keys and passkeys",
		Long: command.Manual(`List or remove a user's security keys and passkeys (WebAuthn). A key is
registered in a browser, on the console's Account page: the key talks to
the browser, which the command line is not.`, "See the subcommands.",
			"coffer account key list alice\ncoffer account key remove alice ID", "That of the subcommand.")}
	list := command.RemoteToo(command.Op(&cobra.Command{Use: "list USER", Short: "list a user's security keys",
		Long: command.Manual(`List a user's security keys: ID, name, when added and last used (one's
own, or anyone's with Sys.Audit on /access).`,
			"One key a line. --json: the second-factors document.", "coffer account key list alice", "0; 7 for an unknown user."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := command.RunOp[*api.SecondFactors](cmd.Context(), a.App, "second-factors", &api.UserParam{User: args[0]})
			if err != nil {
				return err
			}
			return a.Emit(st, nil, func() {
				for _, k := range st.SecurityKeys {
					a.Printf("%s  %s  added %s, last used %s\n", k.ID, command.Dash(k.Name), stamp(k.CreatedAt), stamp(k.LastUsedAt))
				}
			})
		}}, "second-factors"))
	remove := command.RemoteToo(command.Op(&cobra.Command{Use: "remove USER ID", Short: "remove a user's security key",
		Long: command.Manual(`Remove a user's security key by its ID (coffer account key list): for a
user who lost it (an administrator, with Perm.Modify on /access), or one's
own in a signed-in session. The recovery codes go with the user's last
second factor.`, `"security key ID of USER removed".`, "coffer account key remove alice AbC123",
			"0; 7 when the user has no such key; 3 when refused."),
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := command.RunOp[struct{}](cmd.Context(), a.App, "remove-security-key", &api.SecurityKeyParam{UserParam: api.UserParam{User: args[0]}, ID: args[1]})
			if err == nil {
				a.Printf("security key %s of %s removed\n", args[1], args[0])
			}
			return err
		}}, "remove-security-key"))
	cmd.AddCommand(list, remove)
	return cmd
}

func factorsText(st *api.SecondFactors) string {
	var b strings.Builder
	totp := "none"
	switch {
	case st.TOTP:
		totp = "enrolled"
	case st.TOTPPending:
		totp = "waiting for its first code"
	}
	fmt.Fprintf(&b, "user:            %s\nrequired:        %t\nTOTP:            %s\nrecovery codes:  %d left\nsecurity keys:   %d\n",
		st.User, st.Required, totp, st.RecoveryCodes, len(st.SecurityKeys))
	for _, k := range st.SecurityKeys {
		fmt.Fprintf(&b, "  %s  %s  added %s, last used %s\n", k.ID, command.Dash(k.Name), stamp(k.CreatedAt), stamp(k.LastUsedAt))
	}
	return b.String()
}

func codesText(rc *api.RecoveryCodes) string {
	return "Recovery codes of " + rc.User + " (each works once; shown this once):\n  " + strings.Join(rc.Codes, "\n  ") + "\n"
}
