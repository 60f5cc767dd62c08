package api

import "time"

// The inputs of the access-control operations (see inputs.go).

// LoginInput signs a user in.
type LoginInput struct {
	Body LoginRequest
}

// LogoutInput ends the session of the request's cookie.
type LogoutInput struct {
	Session string `cookie:"__Host-coffer-session" doc:"the session cookie"`
}

// CompleteSetupInput chooses a password with a one-time setup link.
type CompleteSetupInput struct {
	Body SetupRequest
}

// WhoAmIInput asks who the caller is: the request's credentials say it.
type WhoAmIInput struct{}

// ListUsersInput lists the accounts.
type ListUsersInput struct{}

// CreateUserInput creates an account.
type CreateUserInput struct {
	Body CreateUserRequest
}

// UserParam is the user a request names (enable-user, disable-user,
// delete-user and issue-setup-link take nothing else).
type UserParam struct {
	User string `path:"user" maxLength:"64"`
}

// ChangePasswordInput sets a user's password.
type ChangePasswordInput struct {
	UserParam
	Body PasswordRequest
}

// ListTokensInput lists a user's API tokens.
type ListTokensInput struct {
	User string `query:"user" maxLength:"64" doc:"whose tokens (default: one's own)"`
}

// CreateTokenInput creates an API token.
type CreateTokenInput struct {
	Body TokenRequest
}

// RevokeTokenInput revokes an API token.
type RevokeTokenInput struct {
	Token string `path:"token" maxLength:"64" doc:"the token's ID"`
}

// ListACLInput lists the ACL entries.
type ListACLInput struct{}

// SetACLInput grants a role on a path.
type SetACLInput struct {
	Body ACLEntry
}

// RemoveACLInput removes an ACL entry.
type RemoveACLInput struct {
	Body ACLEntry
}

// QueryAuditInput filters the audit log.
type QueryAuditInput struct {
	User      string    `query:"user" maxLength:"64"`
	TokenID   string    `query:"token_id" maxLength:"64"`
	Operation string    `query:"operation" maxLength:"64"`
	Object    string    `query:"object" maxLength:"1024" doc:"an ACL path: records on it and below"`
	Result    string    `query:"result" enum:"ok,denied,error"`
	Since     time.Time `query:"since" doc:"records at or after this time"`
	Until     time.Time `query:"until" doc:"records before this time"`
	BeforeID  int64     `query:"before_id" minimum:"0" doc:"the last ID of the previous page"`
	Limit     int       `query:"limit" minimum:"0" maximum:"1000" doc:"the page's size (0: 1000)"`
}
