package accessops

import (
	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/service"
)

// Operations are this domain's rows of the operation table.
var Operations = []service.Operation{

	// Access control.
	{ID: "login", Public: true, AuditsItself: true, Method: "Login", Summary: "sign in with a password: the answer sets the session cookie", HTTP: service.Post,
		Path: "/access/login", SelfService: "signing in is how a caller gets a session (throttled and audited by internal/auth)",
		NotOnCommandLine: "a browser's sign-in: the command line uses API tokens", Endpoint: service.Endpoint[api.LoginInput, loginOut](epLogin)},
	{ID: "logout", Public: true, AuditsItself: true, Method: "Logout", Summary: "sign out: end the session of the cookie", HTTP: service.Post, Path: "/access/logout",
		SelfService: "ends the caller's own session, whatever it holds", NotOnCommandLine: "a browser's sign-out",
		Endpoint: service.Endpoint[api.LogoutInput, logoutOut](epLogout)},
	{ID: "complete-setup", Public: true, AuditsItself: true, Method: "CompleteSetup", Summary: "choose a password with a one-time setup link", HTTP: service.Post,
		Path: "/access/setup", SelfService: "the one-time link is the credential (checked by internal/auth)",
		NotOnCommandLine: "the setup link opens the console's setup page", Endpoint: service.Returns(Ops.CompleteSetup)},
	{ID: "whoami", Method: "WhoAmI", Summary: "who the caller is: the user signed in, and the API token", HTTP: service.Get,
		Path: "/access/whoami", DuringSignIn: true, SelfService: "everyone may ask who they are", NotOnCommandLine: "the console's header: the command line knows its token",
		Endpoint: service.Returns(Ops.WhoAmI)},
	{ID: "list-users", Method: "Users", Summary: "list the accounts (one's own without Sys.Audit on /access)", HTTP: service.Get,
		Path: "/access/users", SelfService: "everyone sees their own account; internal/auth shows the rest to Sys.Audit on /access",
		Endpoint: service.Returns(Ops.Users)},
	{ID: "create-user", AuditsItself: true, Method: "CreateUser", Summary: "create an account (with a one-time setup link when no password is given)",
		HTTP: service.Post, Path: "/access/users", Requires: service.Require(auth.PermModify, auth.AccessPath),
		Endpoint: service.Creates(Ops.CreateUser)},
	{ID: "enable-user", AuditsItself: true, Method: "EnableUser", Summary: "let a disabled user sign in again", HTTP: service.Post,
		Path: "/access/users/{user}/enable", Requires: service.Require(auth.PermModify, auth.AccessPath), Endpoint: service.ReturnsNothing(Ops.EnableUser)},
	{ID: "disable-user", AuditsItself: true, Method: "DisableUser", Summary: "end a user's sessions and stop its tokens", HTTP: service.Post,
		Path: "/access/users/{user}/disable", Requires: service.Require(auth.PermModify, auth.AccessPath), Endpoint: service.ReturnsNothing(Ops.DisableUser)},
	{ID: "delete-user", AuditsItself: true, Method: "DeleteUser", Summary: "delete an account with its tokens, sessions and ACL entries", HTTP: service.Delete,
		Path: "/access/users/{user}", Requires: service.Require(auth.PermModify, auth.AccessPath), Endpoint: service.ReturnsNothing(Ops.DeleteUser)},
	{ID: "issue-setup-link", AuditsItself: true, Method: "IssueSetupLink", Summary: "give a user a one-time link to choose a password", HTTP: service.Post,
		Path: "/access/users/{user}/setup-link", Requires: service.Require(auth.PermModify, auth.AccessPath),
		Endpoint: service.Creates(Ops.IssueSetupLink)},
	{ID: "change-password", AuditsItself: true, Method: "ChangePassword", Summary: "change a password (one's own with the old one)", HTTP: service.Post,
		Path: "/access/users/{user}/password", SelfService: "one's own password with the old one; others' need Perm.Modify on /access (internal/auth)",
		Endpoint: service.ReturnsNothing(Ops.ChangePassword)},
	{ID: "list-tokens", Method: "Tokens", Summary: "list a user's API tokens", HTTP: service.Get, Path: "/access/tokens",
		SelfService: "one's own tokens; others' need Sys.Audit on /access (internal/auth)", Endpoint: service.Returns(Ops.Tokens)},
	{ID: "create-token", AuditsItself: true, Method: "CreateToken", Summary: "create an API token (its secret is shown this once)", HTTP: service.Post,
		Path: "/access/tokens", SelfService: "one's own tokens, at most one's own rights; others' need Perm.Modify on /access (internal/auth)",
		Endpoint: service.Creates(Ops.CreateToken)},
	{ID: "revoke-token", AuditsItself: true, Method: "RevokeToken", Summary: "revoke an API token at once", HTTP: service.Delete, Path: "/access/tokens/{token}",
		SelfService: "one's own tokens (a token itself too); others' need Perm.Modify on /access (internal/auth)",
		Endpoint:    service.ReturnsNothing(Ops.RevokeToken)},
	{ID: "list-acl", Method: "ACL", Summary: "list ACL entries (one's own without Sys.Audit on /access)", HTTP: service.Get, Path: "/access/acl",
		SelfService: "everyone sees their own entries; internal/auth shows the rest to Sys.Audit on /access",
		Endpoint:    service.Returns(Ops.ACL)},
	{ID: "set-acl", AuditsItself: true, Method: "SetACL", Summary: "grant a role on a path to a user or an API token", HTTP: service.Put, Path: "/access/acl",
		SelfService: "needs Perm.Modify on the entry's path, or being the token's user (internal/auth checks the path in the body)",
		Endpoint:    service.ReturnsNothing(Ops.SetACL)},
	{ID: "remove-acl", AuditsItself: true, Method: "RemoveACL", Summary: "remove an ACL entry", HTTP: service.Post, Path: "/access/acl/remove",
		SelfService: "needs Perm.Modify on the entry's path, or being the token's user (internal/auth checks the path in the body)",
		Endpoint:    service.ReturnsNothing(Ops.RemoveACL)},
	{ID: "query-audit", Method: "Audit", Summary: "read the audit log, newest first (one's own records without Sys.Audit on /system)",
		HTTP: service.Get, Path: "/audit", SelfService: "everyone reads their own records; internal/auth shows the rest to Sys.Audit on /system",
		Endpoint: service.Returns(Ops.Audit)},
}
