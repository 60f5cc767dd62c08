package fleet

import (
	"net/url"
	"strings"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// WorkerOfDSN is the worker whose own role (catalog.WorkerRole) the
// catalog address dsn logs in as: such an address is a worker's own
// credential, as its token is (the token's role and password written
// out). ok is false for any other role, or an address that names none.
func WorkerOfDSN(dsn string) (name string, ok bool) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", false
	}
	role := u.Query().Get("user")
	if u.User != nil && u.User.Username() != "" {
		role = u.User.Username()
	}
	name, ok = strings.CutPrefix(role, catalog.WorkerGroupRole+"_")
	return name, ok && CheckName(name) == nil
}
