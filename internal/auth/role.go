package auth

import (
	"fmt"
	"strings"
)

// Role is a named set of privileges, granted on an ACL path.
type Role string

// The roles. docs/design/server.md ("Access control") justifies each set;
// the point is Veeam's split: who runs backups cannot read data out, who
// restores cannot change what is backed up.
const (
	RoleAdmin           Role = "Admin"
	RoleAuditor         Role = "Auditor"
	RoleBackupOperator  Role = "BackupOperator"
	RoleRestoreOperator Role = "RestoreOperator"
	RoleRepositoryAdmin Role = "RepositoryAdmin"
	RolePolicyEditor    Role = "PolicyEditor"
	// RoleNoAccess grants nothing: an entry deeper in the tree replaces
	// what is inherited, so it takes a subtree away (PBS's NoAccess).
	RoleNoAccess Role = "NoAccess"
)

var roleOrder = []Role{RoleAdmin, RoleAuditor, RoleBackupOperator, RoleRestoreOperator, RoleRepositoryAdmin,
	RolePolicyEditor, RoleNoAccess}

var rolePrivileges = map[Role]Privilege{
	RoleAdmin: AllPrivileges,
	// Sees everything there is to see, changes nothing and reads no
	// backed-up data.
	RoleAuditor: SysAudit | RepoAudit | ConnAudit | PolicyAudit,
	// Runs backups (policies, or a VM into a repository) and checks
	// them; cannot read data out, restore, prune or edit policies.
	RoleBackupOperator: RepoAudit | RepoBackup | RepoVerify | ConnAudit | ConnBackup | PolicyAudit | PolicyRun,
	// Reads data out and writes VMs and disks back; cannot start
	// backups, delete points or edit policies.
	RoleRestoreOperator: RepoAudit | RepoRead | ConnAudit | ConnRestore | PolicyAudit,
	// Looks after the storage: verify, prune and gc, repair, keys and
	// settings; no backups, no restores.
	RoleRepositoryAdmin: RepoAudit | RepoVerify | RepoPrune | RepoModify,
	// Writes policies and sees the repositories and VMs they name; does
	// not run them.
	RolePolicyEditor: PolicyAudit | PolicyModify | RepoAudit | ConnAudit,
	RoleNoAccess:     0,
}

// Roles returns every role.
func Roles() []Role { return append([]Role(nil), roleOrder...) }

// Privileges returns the role's privileges (none for an unknown role).
func (r Role) Privileges() Privilege { return rolePrivileges[r] }

// ParseRole reads a role name.
func ParseRole(name string) (Role, error) {
	r := Role(name)
	if _, ok := rolePrivileges[r]; !ok {
		names := make([]string, len(roleOrder))
		for i, r := range roleOrder {
			names[i] = string(r)
		}
		return "", fmt.Errorf("%w: unknown role %q; the roles are %s", ErrInvalid, name, strings.Join(names, ", "))
	}
	return r, nil
}
