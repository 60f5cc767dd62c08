package auth

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// The audit objects of accounts and tokens: paths below /access, so that
// a query for /access/users/bob finds everything done to bob's account
// and tokens.
func userObject(name string) string { return AccessPath + "/users/" + url.PathEscape(name) }

func tokenObject(user, id string) string { return userObject(user) + "/tokens/" + url.PathEscape(id) }

// grantsDetail describes grants for the audit log.
func grantsDetail(entries []catalog.ACLEntry) string {
	if len(entries) == 0 {
		return "no grants"
	}
	parts := make([]string, len(entries))
	for i, e := range entries {
		parts[i] = roleDetail(e.Role, e.Path, e.Propagate)
	}
	return "grants " + strings.Join(parts, ", ")
}

func roleDetail(role, path string, propagate bool) string {
	if propagate {
		return fmt.Sprintf("%s on %s and below", role, path)
	}
	return fmt.Sprintf("%s on %s", role, path)
}

// Event is an operation to record in the audit log.
type Event struct {
	Subject    *Subject // who (nil: not authenticated)
	Operation  string   // the operation's ID
	Object     string   // the ACL path it acted on
	RemoteAddr string
	// Err is the operation's error, nil when it succeeded. Its class is
	// ErrorClass when set (the service layer's api.Classify), else
	// Class(Err). The message is never recorded: only the class.
	Err        error
	ErrorClass string
}

// Record appends an event to the audit log: the server's middleware
// records every mutating operation and every refused request. Records
// hold names, IDs, paths and classes, never a secret.
func (s *Service) Record(ctx context.Context, e Event) error {
	r := s.auditRecord(e.Subject, e.Operation, e.Object, e.Err)
	r.RemoteAddr = e.RemoteAddr
	if e.Err != nil && e.ErrorClass != "" {
		r.ErrorClass = e.ErrorClass
		r.Result = catalog.AuditError
		switch e.ErrorClass {
		case "denied", "unauthenticated", "locked":
			r.Result = catalog.AuditDenied
		}
	}
	return s.store.AppendAudit(ctx, []catalog.AuditRecord{r})
}

// QueryAudit lists audit records newest first; page with
// f.BeforeID = the last ID of the previous page. The whole log needs
// Sys.Audit on /system; without it a user sees only its own records.
func (s *Service) QueryAudit(ctx context.Context, actor *Subject, f catalog.AuditFilter) ([]catalog.AuditRecord, error) {
	if f.Object != "" {
		if _, err := splitPath(f.Object); err != nil {
			return nil, err
		}
	}
	if f.Limit <= 0 || f.Limit > MaxAuditPage {
		f.Limit = MaxAuditPage
	}
	if !Allowed(actor, SystemPath, SysAudit) {
		if actor == nil {
			return nil, errNoCredentials
		}
		f.User = actor.User
	}
	return s.store.ListAudit(ctx, f)
}

// MaxAuditPage bounds one page of the audit log.
const MaxAuditPage = 1000
