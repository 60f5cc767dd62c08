package server

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/coffer-backup/coffer/internal/auth"
)

// The two ends of a sign-in through an OpenID Connect realm (outside
// /api/v1: the browser navigates to them, no script calls them): the
// sign-in page's button leads to /auth/oidc/REALM, which sends the
// browser to the provider; the provider sends it back to
// /auth/oidc/REALM/callback, which opens the session and goes on to the
// console. Failures go back to the sign-in page, saying why.
func (s *Server) oidcRoutes() {
	s.mux.HandleFunc("GET /auth/oidc/{realm}", s.oidcStart)
	s.mux.HandleFunc("GET /auth/oidc/{realm}/callback", s.oidcCallback)
}

// oidcCallbackURL is the redirect URI registered at the provider: under
// the server's public URL, or else the address the browser used.
func (s *Server) oidcCallbackURL(r *http.Request, realm string) string {
	base := ""
	if s.cfg.Service != nil {
		base = s.cfg.Service.Config.PublicURL
	}
	if base == "" {
		scheme := "https"
		if r.TLS == nil {
			scheme = "http"
		}
		base = scheme + "://" + r.Host
	}
	return strings.TrimRight(base, "/") + "/auth/oidc/" + url.PathEscape(realm) + "/callback"
}

func (s *Server) oidcStart(w http.ResponseWriter, r *http.Request) {
	realm := r.PathValue("realm")
	start, err := s.cfg.Access.StartOIDC(r.Context(), realm, s.oidcCallbackURL(r, realm), consoleTarget(r.URL.Query().Get("next")))
	if err != nil {
		s.oidcFailed(w, r, realm, err)
		return
	}
	http.SetCookie(w, start.Cookie)
	http.Redirect(w, r, start.URL, http.StatusFound)
}

func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request) {
	realm := r.PathValue("realm")
	ret := auth.OIDCReturn{Realm: realm, Callback: s.oidcCallbackURL(r, realm), Query: r.URL.Query(), RemoteAddr: r.RemoteAddr}
	if c, err := r.Cookie(auth.OIDCFlowCookieName); err == nil {
		ret.Cookie = c.Value
	}
	// The flow is spent, whatever its outcome.
	http.SetCookie(w, &http.Cookie{Name: auth.OIDCFlowCookieName, Value: "", Path: "/", MaxAge: -1, Secure: true,
		HttpOnly: true, SameSite: http.SameSiteLaxMode})
	ns, next, err := s.cfg.Access.FinishOIDC(r.Context(), ret)
	if err != nil {
		s.oidcFailed(w, r, realm, err)
		return
	}
	http.SetCookie(w, auth.SessionCookie(ns))
	http.Redirect(w, r, consoleTarget(next), http.StatusSeeOther)
}

// oidcFailed goes back to the sign-in page with the reason; a failure of
// the server or the provider is logged and shown without its details.
func (s *Server) oidcFailed(w http.ResponseWriter, r *http.Request, realm string, err error) {
	msg := err.Error()
	var locked *auth.LockedError
	if auth.Class(err) == "internal" && !errors.As(err, &locked) {
		s.log.Error("OIDC sign-in failed", "realm", realm, "error", err)
		msg = "the sign-in through realm " + realm + " failed: the server's log says why"
	}
	http.Redirect(w, r, "/ui/login?failed="+url.QueryEscape(msg), http.StatusSeeOther)
}

// consoleTarget keeps a redirect inside the console (as the console's
// own sign-in does): anything else goes to the dashboard.
func consoleTarget(next string) string {
	if strings.HasPrefix(next, "/ui/") && !strings.HasPrefix(next, "/ui//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return "/ui/"
}
