package service

import (
	"context"
	"net/http"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
)

// The endpoints of access control.

type loginIn struct {
	Body api.LoginRequest
}

type loginOut struct {
	SetCookie http.Cookie `header:"Set-Cookie"`
	Body      api.Session
}

func epLogin(ctx context.Context, s *Service, in *loginIn) (*loginOut, error) {
	ns, err := s.Login(ctx, in.Body)
	if err != nil {
		return nil, err
	}
	return &loginOut{SetCookie: *auth.SessionCookie(ns), Body: api.Session{User: ns.User, ExpiresAt: ns.ExpiresAt}}, nil
}

type logoutIn struct {
	Session string `cookie:"__Host-coffer-session" doc:"the session cookie"`
}

type logoutOut struct {
	SetCookie http.Cookie `header:"Set-Cookie"`
}

func (*logoutOut) status() int { return http.StatusNoContent }

func epLogout(ctx context.Context, s *Service, in *logoutIn) (*logoutOut, error) {
	if err := s.Logout(ctx, in.Session); err != nil {
		return nil, err
	}
	return &logoutOut{SetCookie: *auth.ClearSessionCookie()}, nil
}

type setupIn struct {
	Body api.SetupRequest
}

func epSetup(ctx context.Context, s *Service, in *setupIn) (*Result[*api.SetupDone], error) {
	return result(s.CompleteSetup(ctx, in.Body))
}

func epWhoAmI(ctx context.Context, s *Service, _ *struct{}) (*Result[*api.Caller], error) {
	return result(s.WhoAmI(ctx))
}

func epUsers(ctx context.Context, s *Service, _ *struct{}) (*Result[[]api.User], error) {
	return result(s.Users(ctx))
}

type createUserIn struct {
	Body api.CreateUserRequest
}

func epCreateUser(ctx context.Context, s *Service, in *createUserIn) (*Created[*api.SetupLink], error) {
	l, err := s.CreateUser(ctx, in.Body)
	if err != nil {
		return nil, err
	}
	return created(l), nil
}

// UserParam is the user a request names.
type UserParam struct {
	User string `path:"user" maxLength:"64"`
}

func epEnableUser(ctx context.Context, s *Service, in *UserParam) (*NoContent, error) {
	return noContent(), s.EnableUser(ctx, in.User)
}

func epDisableUser(ctx context.Context, s *Service, in *UserParam) (*NoContent, error) {
	return noContent(), s.DisableUser(ctx, in.User)
}

func epDeleteUser(ctx context.Context, s *Service, in *UserParam) (*NoContent, error) {
	return noContent(), s.DeleteUser(ctx, in.User)
}

func epIssueSetupLink(ctx context.Context, s *Service, in *UserParam) (*Created[*api.SetupLink], error) {
	l, err := s.IssueSetupLink(ctx, in.User)
	if err != nil {
		return nil, err
	}
	return created(l), nil
}

type passwordIn struct {
	UserParam
	Body api.PasswordRequest
}

func epChangePassword(ctx context.Context, s *Service, in *passwordIn) (*NoContent, error) {
	return noContent(), s.ChangePassword(ctx, in.User, in.Body)
}

type tokensIn struct {
	User string `query:"user" maxLength:"64" doc:"whose tokens (default: one's own)"`
}

func epTokens(ctx context.Context, s *Service, in *tokensIn) (*Result[[]api.Token], error) {
	return result(s.Tokens(ctx, in.User))
}

type createTokenIn struct {
	Body api.TokenRequest
}

func epCreateToken(ctx context.Context, s *Service, in *createTokenIn) (*Created[*api.NewToken], error) {
	t, err := s.CreateToken(ctx, in.Body)
	if err != nil {
		return nil, err
	}
	return created(t), nil
}

type tokenIn struct {
	Token string `path:"token" maxLength:"64" doc:"the token's ID"`
}

func epRevokeToken(ctx context.Context, s *Service, in *tokenIn) (*NoContent, error) {
	return noContent(), s.RevokeToken(ctx, in.Token)
}

func epACL(ctx context.Context, s *Service, _ *struct{}) (*Result[[]api.ACLEntry], error) {
	return result(s.ACL(ctx))
}

type aclIn struct {
	Body api.ACLEntry
}

func epSetACL(ctx context.Context, s *Service, in *aclIn) (*NoContent, error) {
	return noContent(), s.SetACL(ctx, in.Body)
}

func epRemoveACL(ctx context.Context, s *Service, in *aclIn) (*NoContent, error) {
	return noContent(), s.RemoveACL(ctx, in.Body)
}

type auditIn struct {
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

func epAudit(ctx context.Context, s *Service, in *auditIn) (*Result[[]api.AuditRecord], error) {
	return result(s.Audit(ctx, AuditInput{User: in.User, TokenID: in.TokenID, Operation: in.Operation, Object: in.Object,
		Result: in.Result, Since: in.Since, Until: in.Until, BeforeID: in.BeforeID, Limit: in.Limit}))
}
