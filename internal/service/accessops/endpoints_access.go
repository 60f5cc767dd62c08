package accessops

import (
	"context"
	"net/http"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/service"
)

// The endpoints of access control that answer with more than a document:
// signing in and out set the session cookie. The other operations are
// bound to their methods (access.go) in the table.

type loginOut struct {
	SetCookie http.Cookie `header:"Set-Cookie"`
	Body      api.Session
}

func epLogin(ctx context.Context, svc *service.Service, in *api.LoginInput) (*loginOut, error) {
	s := Ops{svc}
	ns, err := s.Login(ctx, in)
	if err != nil {
		return nil, err
	}
	return &loginOut{SetCookie: *auth.SessionCookie(ns), Body: api.Session{User: ns.User, ExpiresAt: ns.ExpiresAt, Pending: ns.Pending}}, nil
}

type logoutOut struct {
	SetCookie http.Cookie `header:"Set-Cookie"`
}

func (*logoutOut) Status() int { return http.StatusNoContent }

func epLogout(ctx context.Context, svc *service.Service, in *api.LogoutInput) (*logoutOut, error) {
	s := Ops{svc}
	if err := s.Logout(ctx, in); err != nil {
		return nil, err
	}
	return &logoutOut{SetCookie: *auth.ClearSessionCookie()}, nil
}
