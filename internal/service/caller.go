package service

import (
	"context"

	"github.com/coffer-backup/coffer/internal/auth"
)

// Who calls an operation, from where, and what of a listing they may see.

type remoteAddrKey struct{}

// WithRemoteAddr returns ctx carrying the client's address, for the audit
// log.
func WithRemoteAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, remoteAddrKey{}, addr)
}

func RemoteAddr(ctx context.Context) string {
	s, _ := ctx.Value(remoteAddrKey{}).(string)
	return s
}

// Actor is who runs an operation: the authenticated subject, or on the
// command line (Config.Local) the local administrator.
func (s *Service) Actor(ctx context.Context) *auth.Subject {
	if sub := auth.SubjectFrom(ctx); sub != nil {
		return sub
	}
	if s.Config.Local {
		return auth.Local()
	}
	return nil
}

// Visible is the items the caller holds priv on through one of their
// paths ([] when none).
func Visible[T any](ctx context.Context, s *Service, priv auth.Privilege, items []T, paths func(T) []string) []T {
	out := auth.Filter(s.Actor(ctx), priv, items, paths)
	if out == nil {
		out = []T{}
	}
	return out
}
