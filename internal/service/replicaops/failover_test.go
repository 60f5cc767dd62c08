package replicaops

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/auth"
)

// TestFailoverNeedsItsOwnPrivilege: each failover operation requires
// Sys.Failover on its plan, and of the built-in roles only Admin holds it
// (a backup or restore operator cannot fail over).
func TestFailoverNeedsItsOwnPrivilege(t *testing.T) {
	found := 0
	for _, op := range Operations {
		if _, ok := map[string]bool{"test-failover": true, "failover": true, "planned-failover": true, "failback": true}[op.ID]; !ok {
			continue
		}
		found++
		if len(op.Requires) != 1 || op.Requires[0].Privilege != auth.SysFailover || op.Requires[0].Object != "/system/failover-plans/{name}" {
			t.Errorf("%s requires %+v", op.ID, op.Requires)
		}
	}
	if found != len(failoverOpIDs) {
		t.Fatalf("%d failover operations in the table, want %d", found, len(failoverOpIDs))
	}
	for _, r := range auth.Roles() {
		if r.Privileges().Has(auth.SysFailover) != (r == auth.RoleAdmin) {
			t.Errorf("role %s: Sys.Failover %v", r, r.Privileges().Has(auth.SysFailover))
		}
	}
}
