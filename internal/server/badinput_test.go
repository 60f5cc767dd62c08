package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
)

// TestBadInputIsAProblem: every kind of bad request gets a 4xx answer as
// application/problem+json with its class and a message saying what is
// wrong: never a 500, never a hang (a request that hangs fails the test
// after a generous bound).
func TestBadInputIsAProblem(t *testing.T) {
	e := newEnv(t, "")
	admin := e.tokens["admin"]
	disk := e.point("disk").ID
	expired := e.token("admin", auth.Grant{Path: "/", Role: auth.RoleAdmin, Propagate: true})
	e.clock.advance(2 * time.Hour) // past the token's hour; the others are made again below
	expiredAnswer := e.do(expired, http.MethodGet, "/repositories/default/stats", nil)
	e.clock.advance(-2 * time.Hour)
	expiredAnswer.problem(t, http.StatusUnauthorized, api.Unauthenticated)

	cases := []struct {
		name, token, method, path string
		body                      any
		status                    int
		class                     api.Class
		says                      string
	}{
		{"malformed JSON", admin, "POST", "/repositories/default/verify", `{"read_data": tru`, 400, api.Invalid, "invalid character"},
		{"unknown field", admin, "POST", "/repositories/default/verify", `{"read_dat": true}`, 422, api.Invalid, "read_dat"},
		{"wrong type", admin, "POST", "/repositories/default/gc", `{"dry_run": "yes"}`, 422, api.Invalid, "boolean"},
		{"oversized body", admin, "POST", "/repositories/default/protect",
			`{"points": ["` + strings.Repeat("a", 70<<10) + `"]}`, 413, api.Invalid, "too large"},
		{"restore target climbing out", admin, "POST", "/repositories/default/points/" + disk + "/restore",
			map[string]any{"to": "../../etc/passwd"}, 400, api.Invalid, `climbs out`},
		{"restore target absolute", admin, "POST", "/repositories/default/points/" + disk + "/restore",
			map[string]any{"to": "/etc/passwd"}, 400, api.Invalid, "absolute"},
		{"extract into a climbing path", admin, "POST", "/repositories/default/points/" + disk + "/files/extract",
			map[string]any{"paths": []string{"/"}, "to": "a/../../b"}, 400, api.Invalid, "climbs out"},
		{"browse a climbing path", admin, "GET", "/repositories/default/points/" + disk + "/files?path=/etc/../../x", nil,
			400, api.Invalid, `".."`},
		{"download a climbing path", admin, "GET", "/repositories/default/points/" + disk + "/files/archive?path=../../etc", nil,
			400, api.Invalid, `".."`},
		{"backup an image outside the image directory", admin, "POST", "/repositories/default/backups/disk",
			map[string]any{"paths": []string{"../catalog.db"}}, 400, api.Invalid, "climbs out"},
		{"unknown point", admin, "GET", "/repositories/default/points/0123456789ab/volumes", nil, 404, api.NotFound, "0123456789ab"},
		{"unknown repository", admin, "GET", "/repositories/elsewhere/points", nil, 404, api.NotFound, "elsewhere"},
		{"unknown job", admin, "GET", "/jobs/987654", nil, 404, api.NotFound, "987654"},
		{"job ID not a number", admin, "GET", "/jobs/abc", nil, 422, api.Invalid, "id"},
		{"unknown user", admin, "DELETE", "/access/users/ghost", nil, 404, api.NotFound, "ghost"},
		{"unknown repair", admin, "POST", "/repositories/default/repair/everything", `{}`, 422, api.Invalid, "what"},
		{"unknown query parameter", admin, "GET", "/repositories/default/points?color=red", nil, 422, api.Invalid, "color"},
		{"bad enum", admin, "GET", "/jobs?status=sleeping", nil, 422, api.Invalid, "status"},
		{"no credentials", "", "GET", "/repositories/default/points", nil, 401, api.Unauthenticated, "Bearer"},
		{"malformed token", "coffer_nothex_x", "GET", "/repositories/default/points", nil, 401, api.Unauthenticated, "malformed"},
		{"unknown token", "coffer_0123456789abcdef_" + strings.Repeat("0", 64), "GET", "/jobs", nil, 401, api.Unauthenticated, "unknown"},
		{"without the privilege", e.tokens["auditor"], "POST", "/repositories/default/gc", `{}`, 403, api.Denied, "Repo.Prune"},
		{"unknown route", admin, "GET", "/backups-of-everything", nil, 404, api.NotFound, "openapi.json"},
		{"wrong method", admin, "DELETE", "/repositories/default/stats", nil, 404, api.NotFound, "DELETE"},
		{"forget without a rule", admin, "POST", "/repositories/default/forget", `{"keep": {}}`, 400, api.Invalid, "keep rule"},
		{"wrong password", "", "POST", "/access/login", map[string]any{"user": "admin", "password": "guess"}, 401, api.Unauthenticated, "wrong user name or password"},
		{"used setup link", "", "POST", "/access/setup", map[string]any{"token": "coffersetup_" + strings.Repeat("ab", 32), "password": "twelve chars long"},
			401, api.Unauthenticated, "setup link"},
		{"weak password", admin, "POST", "/access/users", map[string]any{"name": "carol", "password": "short"}, 400, api.Invalid, "12"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			detail := e.do(c.token, c.method, c.path, c.body).problem(t, c.status, c.class)
			if !strings.Contains(detail, c.says) && !strings.Contains(strings.ToLower(detail), strings.ToLower(c.says)) {
				t.Errorf("the message %q does not say %q", detail, c.says)
			}
		})
	}
}

// TestLockedSignInIsTooManyRequests: after the failures the throttle
// allows, a sign-in is refused with 429 and Retry-After, not the 423 of
// a repository's lock.
func TestLockedSignInIsTooManyRequests(t *testing.T) {
	e := newEnv(t, "")
	for range auth.DefaultUserThrottle.Free {
		e.do("", "POST", "/access/login", map[string]any{"user": "admin", "password": "wrong guess"}).
			problem(t, http.StatusUnauthorized, api.Unauthenticated)
	}
	r := e.do("", "POST", "/access/login", map[string]any{"user": "admin", "password": adminPW})
	r.problem(t, http.StatusTooManyRequests, api.Throttled)
	if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After %q", ra)
	}
}
