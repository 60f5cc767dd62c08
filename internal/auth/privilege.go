package auth

import (
	"fmt"
	"math/bits"
	"strings"
)

// Privilege is a set of privileges, one bit each. An operation requires a
// privilege on an ACL path; a role is a named set of privileges.
type Privilege uint32

// The privileges (docs/design/server.md, "Access control", says what each
// one guards). Repo.Read is the one that lets data out of a repository,
// Conn.Restore the one that writes into the hypervisor: neither belongs to
// whoever runs backups.
const (
	SysAudit Privilege = 1 << iota
	SysModify
	RepoAudit
	RepoRead
	RepoBackup
	RepoVerify
	RepoPrune
	RepoModify
	ConnAudit
	ConnBackup
	ConnRestore
	PolicyAudit
	PolicyModify
	PolicyRun
	PermModify
	// SysFailover starts standbys as the running VMs and switches back
	// (failover plans: test failover, failover, failback), on
	// /system/failover-plans: a privilege of its own, since a failover
	// takes over from production VMs.
	SysFailover

	endOfPrivileges
	// AllPrivileges is every privilege (the Admin role).
	AllPrivileges = endOfPrivileges - 1
)

var privilegeNames = [...]string{
	"Sys.Audit", "Sys.Modify",
	"Repo.Audit", "Repo.Read", "Repo.Backup", "Repo.Verify", "Repo.Prune", "Repo.Modify",
	"Conn.Audit", "Conn.Backup", "Conn.Restore",
	"Policy.Audit", "Policy.Modify", "Policy.Run",
	"Perm.Modify",
	"Sys.Failover",
}

// AllPrivilegeList returns every single privilege in declaration order.
func AllPrivilegeList() []Privilege {
	out := make([]Privilege, len(privilegeNames))
	for i := range out {
		out[i] = 1 << i
	}
	return out
}

// Has reports whether p holds every privilege of q.
func (p Privilege) Has(q Privilege) bool { return p&q == q }

// String names the privileges, comma-separated ("none" for the empty set).
func (p Privilege) String() string {
	if p == 0 {
		return "none"
	}
	var names []string
	for q := p & AllPrivileges; q != 0; q &= q - 1 {
		names = append(names, privilegeNames[bits.TrailingZeros32(uint32(q))])
	}
	if p&^AllPrivileges != 0 {
		names = append(names, fmt.Sprintf("unknown(%#x)", uint32(p&^AllPrivileges)))
	}
	return strings.Join(names, ",")
}

// ParsePrivilege reads one privilege name ("Repo.Read").
func ParsePrivilege(name string) (Privilege, error) {
	for i, n := range privilegeNames {
		if n == name {
			return 1 << i, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown privilege %q; the privileges are %s", ErrInvalid, name, AllPrivileges)
}

// Privileges by the objects they are about.
const (
	sysPrivileges    = SysAudit | SysModify | SysFailover
	repoPrivileges   = RepoAudit | RepoRead | RepoBackup | RepoVerify | RepoPrune | RepoModify
	connPrivileges   = ConnAudit | ConnBackup | ConnRestore
	policyPrivileges = PolicyAudit | PolicyModify | PolicyRun
)

// meaningfulAt returns the privileges that can matter on a path and
// below it, that is those some operation checks there: Repo.* on
// repositories and on VMs (whose backup points a tenant reaches through
// them), Conn.* and Sys.Modify (their configuration) on connections,
// Policy.* on policies, Sys.* on /system, Sys.Audit on /access, Repo.*
// and Sys.Modify (their configuration) on media libraries, which hold
// copies of backup points as repositories do, and Perm.Modify (changing
// the ACL there) everywhere. Anything on / and unknown paths.
func meaningfulAt(comps []string) Privilege {
	if len(comps) == 0 {
		return AllPrivileges
	}
	switch comps[0] {
	case "system":
		return sysPrivileges | PermModify
	case "access":
		return SysAudit | PermModify
	case "repositories":
		return repoPrivileges | PermModify
	case "connections":
		return connPrivileges | repoPrivileges | SysModify | PermModify
	case "policies":
		return policyPrivileges | PermModify
	case "media":
		return repoPrivileges | SysModify | PermModify
	}
	return AllPrivileges
}
