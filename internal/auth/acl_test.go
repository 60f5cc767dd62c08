package auth

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// The role matrix, written out by hand (not derived from rolePrivileges):
// a change to a role must change this table too, on purpose.
var wantRoles = map[Role]string{
	RoleAdmin: "Sys.Audit Sys.Modify Repo.Audit Repo.Read Repo.Backup Repo.Verify Repo.Prune Repo.Modify " +
		"Conn.Audit Conn.Backup Conn.Restore Policy.Audit Policy.Modify Policy.Run Perm.Modify Sys.Failover",
	RoleAuditor:         "Sys.Audit Repo.Audit Conn.Audit Policy.Audit",
	RoleBackupOperator:  "Repo.Audit Repo.Backup Repo.Verify Conn.Audit Conn.Backup Policy.Audit Policy.Run",
	RoleRestoreOperator: "Repo.Audit Repo.Read Conn.Audit Conn.Restore Policy.Audit",
	RoleRepositoryAdmin: "Repo.Audit Repo.Verify Repo.Prune Repo.Modify",
	RolePolicyEditor:    "Repo.Audit Conn.Audit Policy.Audit Policy.Modify",
	RoleNoAccess:        "",
}

// representative paths: every kind of node, and one below a leaf kind.
var matrixPaths = []string{"/", "/system", "/access", "/repositories", "/repositories/r1", "/connections",
	"/connections/c1", "/connections/c1/vm/web", "/policies", "/policies/nightly", "/media", "/media/vtl1", "/system/tasks"}

func TestRoleMatrixAtEveryPath(t *testing.T) {
	if got := len(Roles()); got != len(wantRoles) {
		t.Fatalf("%d roles, the matrix has %d", got, len(wantRoles))
	}
	for _, role := range Roles() {
		want := strings.Fields(wantRoles[role])
		// Granted on / with propagation: the same everywhere.
		s := NewSubject("u", "", []catalog.ACLEntry{{Path: "/", User: "u", Role: string(role), Propagate: true}})
		for _, path := range matrixPaths {
			for _, priv := range AllPrivilegeList() {
				if got := Allowed(s, path, priv); got != slices.Contains(want, priv.String()) {
					t.Errorf("%s on / (propagating): %s on %s = %v", role, priv, path, got)
				}
			}
		}
	}
}

func TestRoleOnASubtree(t *testing.T) {
	for _, role := range Roles() {
		want := strings.Fields(wantRoles[role])
		for _, propagate := range []bool{true, false} {
			s := NewSubject("u", "", []catalog.ACLEntry{{Path: "/connections/c1", User: "u", Role: string(role), Propagate: propagate}})
			for _, priv := range AllPrivilegeList() {
				in := slices.Contains(want, priv.String())
				check := func(path string, want bool) {
					t.Helper()
					if got := Allowed(s, path, priv); got != want {
						t.Errorf("%s on /connections/c1 (propagate %v): %s on %s = %v, want %v", role, propagate, priv, path, got, want)
					}
				}
				check("/connections/c1", in)
				check("/connections/c1/vm/web", in && propagate) // below: only when it propagates
				check("/connections", false)                     // above: never
				check("/", false)
				check("/connections/c2", false) // a sibling
				check("/connections/c10", false)
				check("/repositories/r1", false)
			}
		}
	}
}

// A deeper entry replaces what is inherited, in both directions: a
// narrower role narrows, a wider one widens, NoAccess removes, and a
// non-propagating entry above the path does not count.
func TestDeeperEntryReplacesInherited(t *testing.T) {
	acl := []catalog.ACLEntry{
		{Path: "/", User: "u", Role: "Admin", Propagate: true},
		{Path: "/repositories/archive", User: "u", Role: "Auditor", Propagate: true},
		{Path: "/connections/c1", User: "u", Role: "NoAccess", Propagate: true},
		{Path: "/connections/c1/vm/web", User: "u", Role: "RestoreOperator"},
		{Path: "/policies", User: "u", Role: "PolicyEditor", Propagate: false},
		// Two roles on one node add up.
		{Path: "/connections/c2", User: "u", Role: "BackupOperator", Propagate: true},
		{Path: "/connections/c2", User: "u", Role: "RestoreOperator", Propagate: true},
		// An entry of another user, or of a token, is not the user's.
		{Path: "/connections/c3", User: "other", Role: "NoAccess", Propagate: true},
		{Path: "/connections/c3", User: "u", TokenID: "t", Role: "NoAccess", Propagate: true},
	}
	s := NewSubject("u", "", acl)
	for _, c := range []struct {
		path string
		want Privilege
	}{
		{"/", AllPrivileges},
		{"/repositories/r1", AllPrivileges},
		{"/repositories/archive", RoleAuditor.Privileges()},
		{"/connections/c1", 0},
		{"/connections/c1/vm/db", 0},
		{"/connections/c1/vm/web", RoleRestoreOperator.Privileges()},
		{"/policies", RolePolicyEditor.Privileges()},
		{"/policies/nightly", AllPrivileges}, // the entry on /policies does not propagate
		{"/connections/c2", RoleBackupOperator.Privileges() | RoleRestoreOperator.Privileges()},
		{"/connections/c2/vm/x", RoleBackupOperator.Privileges() | RoleRestoreOperator.Privileges()},
		{"/connections/c3", AllPrivileges},
	} {
		if got := s.Privileges(c.path); got != c.want {
			t.Errorf("privileges on %s = %s, want %s", c.path, got, c.want)
		}
	}
}

func TestNobodyAndMalformedPathsHaveNothing(t *testing.T) {
	admin := NewSubject("u", "", []catalog.ACLEntry{{Path: "/", User: "u", Role: "Admin", Propagate: true}})
	for _, p := range []string{"", "repositories", "/repositories/", "//", "/a//b", "/a/../b", "/a/\x00"} {
		if got := admin.Privileges(p); got != 0 {
			t.Errorf("privileges on malformed path %q = %s", p, got)
		}
	}
	if Allowed(nil, "/", SysAudit) {
		t.Error("a nil subject is allowed something")
	}
	if Allowed(admin, "/", 0) {
		t.Error("no privilege at all is allowed")
	}
	if !Allowed(Local(), "/connections/c1/vm/x", ConnRestore|PermModify) {
		t.Error("the local console is refused")
	}
}

// The separations the roles exist for (Veeam's): no role but Admin both
// puts data in (backups) and takes it out (reads, restores), a restore
// operator cannot change what is backed up or delete it, an auditor
// changes nothing and reads no data, and only Admin changes rights.
func TestRoleSeparation(t *testing.T) {
	takesOut := RepoRead | ConnRestore
	for _, r := range Roles() {
		p := r.Privileges()
		if r == RoleAdmin {
			continue
		}
		if p&(RepoBackup|ConnBackup|PolicyRun) != 0 && p&takesOut != 0 {
			t.Errorf("%s can both back up and read data out: %s", r, p)
		}
		if p&PermModify != 0 || p&SysModify != 0 {
			t.Errorf("%s can change rights or the system: %s", r, p)
		}
	}
	if p := RoleRestoreOperator.Privileges(); p&(PolicyModify|PolicyRun|RepoPrune|RepoModify|RepoBackup) != 0 {
		t.Errorf("RestoreOperator can change policies, backups or points: %s", p)
	}
	if p := RoleAuditor.Privileges(); p&^(SysAudit|RepoAudit|ConnAudit|PolicyAudit) != 0 {
		t.Errorf("Auditor can do more than look: %s", p)
	}
}

// A token holds what both its own entries and its user's allow.
func TestTokenHoldsAtMostItsUsersRights(t *testing.T) {
	acl := []catalog.ACLEntry{
		{Path: "/", User: "u", Role: "Auditor", Propagate: true},
		{Path: "/repositories/r1", User: "u", Role: "BackupOperator", Propagate: true},
		// The token was granted more than the user holds (possible when
		// the user's rights shrink after the grant).
		{Path: "/", User: "u", TokenID: "t1", Role: "Admin", Propagate: true},
		{Path: "/repositories/r1", User: "u", TokenID: "t2", Role: "Auditor", Propagate: true},
	}
	user := NewSubject("u", "", acl)
	t1 := NewSubject("u", "t1", acl)
	t2 := NewSubject("u", "t2", acl)
	t3 := NewSubject("u", "t3", acl) // no entries of its own
	for _, path := range matrixPaths {
		for _, priv := range AllPrivilegeList() {
			u := Allowed(user, path, priv)
			if Allowed(t1, path, priv) != u {
				t.Errorf("token with Admin on /: %s on %s = %v, its user %v", priv, path, !u, u)
			}
			if Allowed(t2, path, priv) && !u {
				t.Errorf("token t2 holds %s on %s, its user does not", priv, path)
			}
			if Allowed(t3, path, priv) {
				t.Errorf("a token without entries holds %s on %s", priv, path)
			}
		}
	}
	if !Allowed(t2, "/repositories/r1", RepoAudit) || Allowed(t2, "/repositories/r1", RepoBackup) ||
		Allowed(t2, "/repositories/r2", RepoAudit) {
		t.Errorf("token t2 (Auditor on r1): %s on r1, %s on r2", t2.Privileges("/repositories/r1"), t2.Privileges("/repositories/r2"))
	}
}

// A tenant with rights on its VMs sees those VMs and their points in a
// shared repository, and nothing else.
func TestFilterForATenant(t *testing.T) {
	acl := []catalog.ACLEntry{
		{Path: VMPath("c1", "web"), User: "tenant", Role: "RestoreOperator"},
		{Path: VMPath("c1", "db/1"), User: "tenant", Role: "Auditor"},
	}
	s := NewSubject("tenant", "", acl)
	type vm struct{ conn, name string }
	vms := []vm{{"c1", "web"}, {"c1", "mail"}, {"c1", "db/1"}, {"c2", "web"}}
	got := Filter(s, ConnAudit, vms, func(v vm) []string { return []string{VMPath(v.conn, v.name)} })
	if fmt.Sprint(got) != "[{c1 web} {c1 db/1}]" {
		t.Errorf("VMs the tenant sees: %v", got)
	}
	type point struct{ repo, conn, vm string }
	points := []point{{"shared", "c1", "web"}, {"shared", "c1", "mail"}, {"shared", "c1", "db/1"}, {"other", "c1", "web"}}
	readable := Filter(s, RepoRead, points, func(p point) []string { return PointPaths(p.repo, p.conn, p.vm) })
	if fmt.Sprint(readable) != "[{shared c1 web} {other c1 web}]" {
		t.Errorf("points the tenant can restore: %v", readable)
	}
	// Lists of connections and repositories: the tenant's connection
	// shows because something below it does.
	if !AllowedBelow(s, ConnectionPath("c1"), ConnAudit) || AllowedBelow(s, ConnectionPath("c2"), ConnAudit) ||
		!AllowedBelow(s, "/", ConnAudit) || AllowedBelow(s, ConnectionPath("c1"), PermModify) {
		t.Error("AllowedBelow disagrees with the tenant's entries")
	}
	if AllowedBelow(s, "/connections/c", ConnAudit) {
		t.Error("AllowedBelow matched a path prefix that is not a parent")
	}
	admin := NewSubject("a", "", []catalog.ACLEntry{{Path: "/", User: "a", Role: "Admin", Propagate: true}})
	if len(Filter(admin, RepoRead, points, func(p point) []string { return PointPaths(p.repo, p.conn, p.vm) })) != len(points) {
		t.Error("an admin does not see every point")
	}
}

func TestPrivilegeNames(t *testing.T) {
	for _, p := range AllPrivilegeList() {
		q, err := ParsePrivilege(p.String())
		if err != nil || q != p {
			t.Errorf("ParsePrivilege(%q) = %v, %v", p.String(), q, err)
		}
	}
	if _, err := ParsePrivilege("Repo.Everything"); err == nil || !strings.Contains(err.Error(), "Repo.Read") {
		t.Errorf("unknown privilege: %v", err)
	}
	if s := (RepoRead | PermModify).String(); s != "Repo.Read,Perm.Modify" {
		t.Errorf("String() = %q", s)
	}
	if _, err := ParseRole("Root"); err == nil || !strings.Contains(err.Error(), "BackupOperator") {
		t.Errorf("unknown role: %v", err)
	}
}

// Every privilege means something somewhere, and on / everything does.
func TestMeaningfulPrivileges(t *testing.T) {
	var union Privilege
	for _, p := range []string{"/system", "/access", "/repositories/r", "/connections/c/vm/v", "/policies/p", "/media/l"} {
		comps, err := splitPath(p)
		must(t, err)
		m := meaningfulAt(comps)
		if !m.Has(PermModify) {
			t.Errorf("Perm.Modify means nothing on %s", p)
		}
		union |= m
	}
	if union != AllPrivileges || meaningfulAt(nil) != AllPrivileges {
		t.Errorf("privileges meaningful nowhere: %s", AllPrivileges&^union)
	}
	comps, _ := splitPath("/connections/c/vm/v")
	if !meaningfulAt(comps).Has(RepoRead | ConnRestore) {
		t.Error("a VM's points cannot be restored through its path")
	}
}
