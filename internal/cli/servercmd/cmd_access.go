package servercmd

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Access control from the command line: accounts, API tokens, ACL entries
// and the audit log. On the server's host the command line acts as the
// local administrator (it has the catalog anyway, and is audited as
// @local); with --server it acts as the token's user, within its rights.

func (a *app) cmdUser() *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "manage the server's user accounts",
		Long: command.Manual(`Manage the accounts that sign in to the server. There is no default
password anywhere: an account gets a password chosen by its creator, or a
one-time setup link for its owner to choose one.`, "See the subcommands.", "coffer user list", "That of the subcommand.")}
	list := command.RemoteToo(command.Op(&cobra.Command{Use: "list", Short: "list the accounts",
		Long: command.Manual(`List the accounts (only one's own without Sys.Audit on /access).`,
			"A table: NAME, REALM, ENABLED, PASSWORD, CREATED, LAST SIGN-IN. --json: a list of user documents.", "coffer user list", "0."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			us, err := command.RunOp[[]api.User](cmd.Context(), a.App, "list-users", &api.ListUsersInput{})
			if err != nil {
				return err
			}
			return a.Emit(us, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tREALM\tENABLED\tPASSWORD\tCREATED\tLAST SIGN-IN")
				for _, u := range us {
					fmt.Fprintf(tw, "%s\t%s\t%t\t%t\t%s\t%s\n", u.Name, u.Realm, u.Enabled, u.HasPassword, stamp(u.CreatedAt),
						stamp(u.LastLoginAt))
				}
				_ = tw.Flush()
			})
		}}, "list-users"))
	var pwFile string
	create := command.RemoteToo(command.Op(&cobra.Command{Use: "create NAME", Short: "create an account",
		Long: command.Manual(`Create an account: with the password in --password-file, or else with a
one-time setup link (valid for an hour) for its owner to choose one.
Grant it roles with `+"`coffer acl set`"+`.`,
			"The setup link, or that the account was created. --json: {user, token, link}.",
			"coffer user create bob\ncoffer acl set /repositories/main bob RestoreOperator", "0; 2 (conflict) when it exists."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := api.CreateUserInput{Body: api.CreateUserRequest{Name: args[0]}}
			if pwFile != "" {
				pw, err := readSecretFile(pwFile)
				if err != nil {
					return err
				}
				in.Body.Password = pw
			}
			l, err := command.RunOp[*api.SetupLink](cmd.Context(), a.App, "create-user", &in)
			if err != nil {
				return err
			}
			return a.Emit(l, nil, func() {
				if l.Token == "" {
					a.Printf("user %s created\n", l.User)
					return
				}
				a.Printf("user %s created. %s\n", l.User, setupText(l))
			})
		}}, "create-user"))
	create.Flags().StringVar(&pwFile, "password-file", "", "file holding the new account's password (default: a setup link)")
	simple := func(use, short, id string, done string) *cobra.Command {
		return command.RemoteToo(command.Op(&cobra.Command{Use: use + " NAME", Short: short,
			Long: command.Manual(short+".", "\""+done+"\". --json: nothing.", "coffer user "+use+" bob", "0; 7 for an unknown user; 2 when it would leave nobody able to manage access."),
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				_, err := command.RunOp[struct{}](cmd.Context(), a.App, id, &api.UserParam{User: args[0]})
				if err == nil {
					a.Printf("user %s %s\n", args[0], done)
				}
				return err
			}}, id))
	}
	link := command.RemoteToo(command.Op(&cobra.Command{Use: "link NAME", Short: "give a user a one-time link to choose a password",
		Long: command.Manual(`Give a user a new one-time setup link (valid for an hour) to choose a
password, nobody else learning it: the way to reset a forgotten password.
The user's password, if any, works until the link is used.`,
			"The setup link. --json: {user, token, link}.", "coffer user link bob", "0; 7 for an unknown user."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := command.RunOp[*api.SetupLink](cmd.Context(), a.App, "issue-setup-link", &api.UserParam{User: args[0]})
			if err != nil {
				return err
			}
			return a.Emit(l, nil, func() { a.Printf("%s\n", setupText(l)) })
		}}, "issue-setup-link"))
	var oldFile, newFile string
	passwd := command.RemoteToo(command.Op(&cobra.Command{Use: "password NAME", Short: "set a user's password",
		Long: command.Manual(`Set a user's password from --new-password-file. Changing one's own
password through a server needs the old one (--old-password-file) and a
signed-in session, not an API token; an administrator sets anyone's (a
setup link, coffer user link, is better: nobody else learns it).`,
			`"password changed".`, "coffer user password bob --new-password-file new.txt", "0; 3 when refused; 2 for a weak password."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := api.ChangePasswordInput{UserParam: api.UserParam{User: args[0]}}
			var err error
			if in.Body.New, err = readSecretFile(newFile); err != nil {
				return err
			}
			if oldFile != "" {
				if in.Body.Old, err = readSecretFile(oldFile); err != nil {
					return err
				}
			}
			_, err = command.RunOp[struct{}](cmd.Context(), a.App, "change-password", &in)
			if err == nil {
				a.Printf("password changed\n")
			}
			return err
		}}, "change-password"))
	passwd.Flags().StringVar(&newFile, "new-password-file", "", "file holding the new password")
	passwd.Flags().StringVar(&oldFile, "old-password-file", "", "file holding the old password (one's own)")
	_ = passwd.MarkFlagRequired("new-password-file")
	cmd.AddCommand(list, create, link, passwd,
		simple("enable", "let a disabled user sign in again (its tokens work again)", "enable-user", "enabled"),
		simple("disable", "end a user's sessions and stop its tokens", "disable-user", "disabled"),
		simple("delete", "delete an account with its tokens, sessions and ACL entries", "delete-user", "deleted"))
	return cmd
}

func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", command.Usagef("%v", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04")
}

func (a *app) cmdToken() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "manage API tokens",
		Long: command.Manual(`Manage API tokens: what scripts and the remote command line (coffer
--server) authenticate with. A token holds at most its user's rights,
and only those its grants give: a token without grants can do nothing.`,
			"See the subcommands.", "coffer token create --user alice --grant /repositories/main=BackupOperator --lifetime 30d", "That of the subcommand.")}
	var listIn api.ListTokensInput
	list := command.RemoteToo(command.Op(&cobra.Command{Use: "list", Short: "list API tokens (never their secrets)",
		Long: command.Manual(`List a user's API tokens (--user; one's own by default).`,
			"A table: ID, USER, EXPIRES, LAST USED, GRANTS, COMMENT. --json: a list of token documents.", "coffer token list --user alice", "0."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ts, err := command.RunOp[[]api.Token](cmd.Context(), a.App, "list-tokens", &listIn)
			if err != nil {
				return err
			}
			return a.Emit(ts, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tUSER\tEXPIRES\tLAST USED\tGRANTS\tCOMMENT")
				for _, t := range ts {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.User, stamp(t.ExpiresAt), stamp(t.LastUsedAt), grantsText(t.Grants), t.Comment)
				}
				_ = tw.Flush()
			})
		}}, "list-tokens"))
	list.Flags().StringVar(&listIn.User, "user", "", "whose tokens (default: one's own)")
	var in api.CreateTokenInput
	var grants []string
	var lifetime string
	var noPropagate bool
	create := command.RemoteToo(command.Op(&cobra.Command{Use: "create", Short: "create an API token (shown once)",
		Long: command.Manual(`Create an API token for --user (one's own by default) with the roles of
--grant PATH=ROLE (repeatable; they propagate below PATH unless
--no-propagate), expiring after --lifetime. A grant beyond the user's own
rights is refused. The token is printed this once: store it (coffer
--token-file reads it), it is kept nowhere.`,
			"The token on stdout (alone, for scripts), its ID and expiry on stderr. --json: {token, info}.",
			`coffer token create --user ci --grant /policies/nightly=BackupOperator --lifetime 90d > ci.token
coffer token create --user alice --grant /=Auditor --comment "alice's laptop"`,
			"0; 3 for a grant beyond the user's rights; 2 for a bad lifetime or role."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := policy.ParseDuration(lifetime)
			if err != nil || d <= 0 {
				return command.Usagef("--lifetime %q is not a duration like 30d or 12h", lifetime)
			}
			in.Body.LifetimeSeconds = d.Seconds()
			in.Body.Grants = []api.Grant{}
			for _, g := range grants {
				path, role, ok := strings.Cut(g, "=")
				if !ok {
					return command.Usagef("--grant %q: want PATH=ROLE, like /repositories/main=BackupOperator", g)
				}
				in.Body.Grants = append(in.Body.Grants, api.Grant{Path: path, Role: role, Propagate: !noPropagate})
			}
			t, err := command.RunOp[*api.NewToken](cmd.Context(), a.App, "create-token", &in)
			if err != nil {
				return err
			}
			return a.Emit(t, nil, func() {
				fmt.Fprintln(a.Stdout, t.Token)
				fmt.Fprintf(a.Stderr, "coffer: token %s of %s, expires %s, %s: shown this once, store it now\n",
					t.Info.ID, t.Info.User, stamp(t.Info.ExpiresAt), grantsText(t.Info.Grants))
			})
		}}, "create-token"))
	create.Flags().StringVar(&in.Body.User, "user", "", "the token's owner (default: one's own)")
	create.Flags().StringVar(&in.Body.Comment, "comment", "", "what the token is for")
	create.Flags().StringVar(&lifetime, "lifetime", "30d", "how long the token works (like 30d, 12h; at most 365d by default)")
	create.Flags().StringArrayVar(&grants, "grant", nil, "PATH=ROLE the token holds (repeatable)")
	create.Flags().BoolVar(&noPropagate, "no-propagate", false, "grants hold on their path only, not below it")
	revoke := command.RemoteToo(command.Op(&cobra.Command{Use: "revoke ID", Short: "revoke an API token at once",
		Long: command.Manual(`Revoke an API token: it stops working at once.`, `"token ID revoked".`, "coffer token revoke 0123456789abcdef", "0; 7 for an unknown token."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := command.RunOp[struct{}](cmd.Context(), a.App, "revoke-token", &api.RevokeTokenInput{Token: args[0]})
			if err == nil {
				a.Printf("token %s revoked\n", args[0])
			}
			return err
		}}, "revoke-token"))
	cmd.AddCommand(list, create, revoke)
	return cmd
}

func grantsText(gs []api.Grant) string {
	if len(gs) == 0 {
		return "no grants"
	}
	var parts []string
	for _, g := range gs {
		s := g.Role + " on " + g.Path
		if g.Propagate {
			s += " and below"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func (a *app) cmdACL() *cobra.Command {
	cmd := &cobra.Command{Use: "acl", Short: "manage who holds which role where",
		Long: command.Manual(`Manage ACL entries: a role of a user (or of one of its API tokens, --token)
on a path. Roles: `+roleNames()+`. Paths: /, /system, /access,
/repositories[/NAME], /connections[/NAME[/vm/VM]], /policies[/NAME], /media[/LIBRARY]. An
entry propagates below its path unless --no-propagate; a deeper entry
replaces what is inherited (NoAccess takes a subtree away).`,
			"See the subcommands.", "coffer acl set /connections/kvm1/vm/web bob RestoreOperator", "That of the subcommand.")}
	list := command.RemoteToo(command.Op(&cobra.Command{Use: "list", Short: "list ACL entries",
		Long: command.Manual(`List the ACL entries (only one's own without Sys.Audit on /access).`,
			"A table: PATH, USER, TOKEN, ROLE, PROPAGATE. --json: a list of ACL entry documents.", "coffer acl list", "0."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			es, err := command.RunOp[[]api.ACLEntry](cmd.Context(), a.App, "list-acl", &api.ListACLInput{})
			if err != nil {
				return err
			}
			return a.Emit(es, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "PATH\tUSER\tTOKEN\tROLE\tPROPAGATE")
				for _, e := range es {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\n", e.Path, e.User, command.Dash(e.TokenID), e.Role, e.Propagate)
				}
				_ = tw.Flush()
			})
		}}, "list-acl"))
	var token string
	var noPropagate bool
	entry := func(args []string) api.ACLEntry {
		return api.ACLEntry{Path: args[0], User: args[1], Role: args[2], TokenID: token, Propagate: !noPropagate}
	}
	set := command.RemoteToo(command.Op(&cobra.Command{Use: "set PATH USER ROLE", Short: "grant a role on a path",
		Long: command.Manual(`Grant USER (or its API token --token ID) ROLE on PATH. It needs
Perm.Modify on the path, or being the token's user.`, `"granted".`,
			"coffer acl set /repositories/main alice RepositoryAdmin\ncoffer acl set / bob NoAccess --no-propagate",
			"0; 3 when refused; 2 for a bad path or role."),
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			e := entry(args)
			_, err := command.RunOp[struct{}](cmd.Context(), a.App, "set-acl", &api.SetACLInput{Body: e})
			if err == nil {
				a.Printf("granted %s on %s to %s\n", e.Role, e.Path, e.User)
			}
			return err
		}}, "set-acl"))
	remove := command.RemoteToo(command.Op(&cobra.Command{Use: "remove PATH USER ROLE", Short: "remove an ACL entry",
		Long: command.Manual(`Remove USER's (or its token's) ROLE on PATH. Removing the last rights to
manage access is refused.`, `"removed".`, "coffer acl remove /repositories/main alice RepositoryAdmin",
			"0; 3 when refused; 7 when there is no such entry."),
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			e := entry(args)
			_, err := command.RunOp[struct{}](cmd.Context(), a.App, "remove-acl", &api.RemoveACLInput{Body: e})
			if err == nil {
				a.Printf("removed %s on %s of %s\n", e.Role, e.Path, e.User)
			}
			return err
		}}, "remove-acl"))
	for _, c := range []*cobra.Command{set, remove} {
		c.Flags().StringVar(&token, "token", "", "the entry is of this API token of the user")
	}
	set.Flags().BoolVar(&noPropagate, "no-propagate", false, "the role holds on PATH only, not below it")
	cmd.AddCommand(list, set, remove)
	return cmd
}

func roleNames() string {
	var names []string
	for _, r := range auth.Roles() {
		names = append(names, string(r))
	}
	return strings.Join(names, ", ")
}

func (a *app) cmdAudit() *cobra.Command {
	var in api.QueryAuditInput
	cmd := command.RemoteToo(command.Op(&cobra.Command{Use: "audit", Short: "read the audit log",
		Long: command.Manual(`Read the audit log, newest first: who (user, API token) did which
operation on which object, with what result, from where. Every change
through the server is recorded, and every refused request. Without
Sys.Audit on /system one sees one's own records only.`,
			"A table: ID, TIME, USER, TOKEN, OPERATION, OBJECT, RESULT, REMOTE, DETAIL. --json: a list of audit record documents.",
			"coffer audit --user bob --limit 20\ncoffer audit --object /repositories/main --result denied", "0."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rs, err := command.RunOp[[]api.AuditRecord](cmd.Context(), a.App, "query-audit", &in)
			if err != nil {
				return err
			}
			return a.Emit(rs, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tTIME\tUSER\tTOKEN\tOPERATION\tOBJECT\tRESULT\tREMOTE\tDETAIL")
				for _, r := range rs {
					result := r.Result
					if r.ErrorClass != "" {
						result += " (" + r.ErrorClass + ")"
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Time.Local().Format("2006-01-02 15:04:05"), command.Dash(r.User),
						command.Dash(r.TokenID), r.Operation, command.Dash(r.Object), result, command.Dash(r.RemoteAddr), r.Detail)
				}
				_ = tw.Flush()
			})
		}}, "query-audit"))
	cmd.Flags().StringVar(&in.User, "user", "", "only this user's records")
	cmd.Flags().StringVar(&in.Operation, "operation", "", "only this operation's records")
	cmd.Flags().StringVar(&in.Object, "object", "", "only records on this ACL path and below")
	cmd.Flags().StringVar(&in.Result, "result", "", "only ok, denied or error")
	cmd.Flags().IntVar(&in.Limit, "limit", 100, "the most records (at most 1000)")
	return cmd
}
