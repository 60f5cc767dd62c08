package auth

import (
	"context"
	"github.com/coffer-backup/coffer/internal/auth/idp"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// The test directory: people (alice and bob in groups, carol disabled by
// the realm's filter, dave in no mapped group), two groups, the service
// account coffer searches with, and AD-looking users (erin, and frank
// whose userAccountControl says ACCOUNTDISABLE).
const testDirectory = `dn: ou=people,dc=coffer,dc=test
objectClass: organizationalUnit
ou: people

dn: ou=groups,dc=coffer,dc=test
objectClass: organizationalUnit
ou: groups

dn: cn=coffer-svc,dc=coffer,dc=test
objectClass: person
cn: coffer-svc
sn: service
userPassword: svc-secret

dn: uid=alice,ou=people,dc=coffer,dc=test
objectClass: inetOrgPerson
uid: alice
cn: Alice
sn: A
userPassword: alice-ldap-pw

dn: uid=bob,ou=people,dc=coffer,dc=test
objectClass: inetOrgPerson
uid: bob
cn: Bob
sn: B
userPassword: bob-ldap-pw

dn: uid=carol,ou=people,dc=coffer,dc=test
objectClass: inetOrgPerson
uid: carol
cn: Carol
sn: C
employeeType: disabled
userPassword: carol-ldap-pw

dn: uid=dave,ou=people,dc=coffer,dc=test
objectClass: inetOrgPerson
uid: dave
cn: Dave
sn: D
userPassword: dave-ldap-pw

dn: cn=backup-admins,ou=groups,dc=coffer,dc=test
objectClass: groupOfNames
cn: backup-admins
member: uid=alice,ou=people,dc=coffer,dc=test

dn: cn=auditors,ou=groups,dc=coffer,dc=test
objectClass: groupOfNames
cn: auditors
member: uid=bob,ou=people,dc=coffer,dc=test
member: uid=carol,ou=people,dc=coffer,dc=test

dn: cn=Erin E,ou=people,dc=coffer,dc=test
objectClass: inetOrgPerson
objectClass: cofferTestADUser
cn: Erin E
sn: E
sAMAccountName: erin
userAccountControl: 512
memberOf: cn=auditors,ou=groups,dc=coffer,dc=test
userPassword: erin-ad-pw

dn: cn=Frank F,ou=people,dc=coffer,dc=test
objectClass: inetOrgPerson
objectClass: cofferTestADUser
cn: Frank F
sn: F
sAMAccountName: frank
userAccountControl: 514
memberOf: cn=auditors,ou=groups,dc=coffer,dc=test
userPassword: frank-ad-pw
`

// ldapRealm is the configuration of an LDAP realm of the test directory
// (as it would be decoded from the realms: section).
func ldapRealm(t *testing.T, d *testutil.Slapd, name string, ldaps bool) RealmConfig {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "bind.pw")
	must(t, os.WriteFile(pw, []byte("svc-secret\n"), 0o600))
	c := RealmConfig{Name: name, Type: RealmLDAP, CAFile: d.TLS.CA, LDAP: idp.LDAP{URL: d.URL, StartTLS: true,
		BindDN: "cn=coffer-svc,dc=coffer,dc=test", BindPasswordFile: pw, UserBase: "ou=people,dc=coffer,dc=test",
		GroupBase: "ou=groups,dc=coffer,dc=test", DisabledFilter: "(employeeType=disabled)"},
		Roles: []RoleMapping{
			{Group: "cn=backup-admins,ou=groups,dc=coffer,dc=test", Role: "Admin"},
			{Group: "auditors", Role: "Auditor", Path: "/repositories"},
		}}
	if ldaps {
		c.LDAP.URL, c.LDAP.StartTLS = d.LDAPSURL, false
	}
	return c
}

func newRealmEnv(t *testing.T, cs ...RealmConfig) *env {
	t.Helper()
	rs, err := NewRealms(cs)
	must(t, err)
	return newEnv(t, Options{Realms: rs})
}

// A directory's users sign in through StartTLS and LDAPS, are created
// with the roles their groups map to, and are refused for a wrong
// password, a disabled account or no mapped group; every attempt is in
// the audit log with its realm.
func TestLDAPRealmSignIn(t *testing.T) {
	d := testutil.StartSlapd(t, testDirectory)
	e := newRealmEnv(t, ldapRealm(t, d, "corp", false), withName(ldapRealm(t, d, "corps", true), "corps"))
	admin := e.setUp()
	ctx := context.Background()

	ns, err := e.svc.Login(ctx, LoginRequest{User: "alice", Password: "alice-ldap-pw", Realm: "corp", RemoteAddr: "198.51.100.7"})
	must(t, err)
	if !ns.Subject.Allowed("/", PermModify) {
		t.Fatalf("alice of backup-admins: want Admin on /, got %v", ns.Subject)
	}
	ns, err = e.svc.Login(ctx, LoginRequest{User: "bob@corps", Password: "bob-ldap-pw", RemoteAddr: "198.51.100.7"})
	must(t, err)
	if !ns.Subject.Allowed("/repositories/r1", RepoAudit) || ns.Subject.Allowed("/", SysAudit) {
		t.Fatalf("bob of auditors over LDAPS: want Auditor on /repositories only, got %v", ns.Subject)
	}
	users, err := e.svc.ListUsers(ctx, admin)
	must(t, err)
	realms := map[string]string{}
	for _, u := range users {
		realms[u.Name] = u.Realm
	}
	if realms["alice"] != "corp" || realms["bob"] != "corps" || realms["admin"] != LocalRealm {
		t.Fatalf("users' realms: %v", realms)
	}
	// A known user signs in through its own realm without naming it.
	_, err = e.svc.Login(ctx, LoginRequest{User: "alice", Password: "alice-ldap-pw", RemoteAddr: "198.51.100.7"})
	must(t, err)

	for _, c := range []struct{ what, user, password, realm string }{
		{"wrong password", "alice", "not-alices", "corp"},
		{"empty password (an unauthenticated bind)", "alice", "", "corp"},
		{"unknown user", "zed", "zed-pw", "corp"},
		{"disabled by the realm's filter", "carol", "carol-ldap-pw", "corp"},
		{"another realm's user", "bob", "bob-ldap-pw", "corp"},
	} {
		_, err := e.svc.Login(ctx, LoginRequest{User: c.user, Password: c.password, Realm: c.realm, RemoteAddr: "198.51.100.7"})
		if err != errBadCredentials {
			t.Errorf("%s: got %v, want %v", c.what, err, errBadCredentials)
		}
	}
	_, err = e.svc.Login(ctx, LoginRequest{User: "dave", Password: "dave-ldap-pw", Realm: "corp", RemoteAddr: "198.51.100.7"})
	wantClass(t, "dave in no mapped group", err, ErrDenied)
	if _, err := e.cat.GetUser(ctx, "dave"); err == nil {
		t.Error("dave was created although no group of his maps to a role")
	}
	_, err = e.svc.Login(ctx, LoginRequest{User: "alice", Password: "alice-ldap-pw", Realm: "nowhere"})
	wantClass(t, "an unknown realm", err, ErrInvalid)

	recs, err := e.svc.QueryAudit(ctx, admin, catalog.AuditFilter{Operation: "login"})
	must(t, err)
	var ok, refused []string
	for _, r := range recs {
		if r.Result == catalog.AuditOK {
			ok = append(ok, r.User+": "+r.Detail)
		} else {
			refused = append(refused, r.Detail)
		}
	}
	want := []string{"alice: realm corp, grants Admin on / and below", "bob: realm corps, grants Auditor on /repositories and below",
		"alice: realm corp, grants Admin on / and below", "admin: realm local"}
	if strings.Join(ok, "\n") != strings.Join(want, "\n") {
		t.Errorf("successful sign-ins in the audit log:\n%s\nwant\n%s", strings.Join(ok, "\n"), strings.Join(want, "\n"))
	}
	if len(refused) != 6 || strings.Count(strings.Join(refused, ","), "realm corp") != 6 {
		t.Errorf("refused sign-ins in the audit log: %q, want 6 of realm corp", refused)
	}
}

func withName(c RealmConfig, name string) RealmConfig {
	c.Name = name
	return c
}

// Active Directory: the user is found by sAMAccountName, its groups come
// from memberOf, and the ACCOUNTDISABLE bit of userAccountControl refuses
// it with the right password.
func TestActiveDirectoryRealm(t *testing.T) {
	d := testutil.StartSlapd(t, testDirectory)
	c := ldapRealm(t, d, "ad", true)
	c.Type, c.LDAP.GroupBase, c.LDAP.DisabledFilter = RealmActiveDirectory, "", ""
	e := newRealmEnv(t, c)
	ctx := context.Background()
	ns, err := e.svc.Login(ctx, LoginRequest{User: "Erin@ad", Password: "erin-ad-pw"})
	must(t, err)
	if ns.User != "erin" || !ns.Subject.Allowed("/repositories/r1", RepoAudit) {
		t.Fatalf("erin through memberOf: got %s %v", ns.User, ns.Subject)
	}
	_, err = e.svc.Login(ctx, LoginRequest{User: "frank@ad", Password: "frank-ad-pw"})
	if err != errBadCredentials {
		t.Fatalf("frank, disabled in userAccountControl: got %v, want %v", err, errBadCredentials)
	}
}

// A realm's user has no password in coffer: none can be set, no setup
// link issued, and a local sign-in never reaches one.
func TestRealmUserHasNoLocalPassword(t *testing.T) {
	d := testutil.StartSlapd(t, testDirectory)
	e := newRealmEnv(t, ldapRealm(t, d, "corp", false))
	admin := e.setUp()
	ctx := context.Background()
	ns, err := e.svc.Login(ctx, LoginRequest{User: "alice@corp", Password: "alice-ldap-pw"})
	must(t, err)
	err = e.svc.ChangePassword(ctx, admin, PasswordChange{User: "alice", New: "a brand new local password"})
	wantClass(t, "an administrator sets a realm user's password", err, ErrInvalid)
	if !strings.Contains(err.Error(), "realm corp") {
		t.Errorf("the refusal does not say why: %v", err)
	}
	err = e.svc.ChangePassword(ctx, ns.Subject, PasswordChange{User: "alice", Old: "alice-ldap-pw", New: "a brand new local password"})
	wantClass(t, "alice sets herself a local password", err, ErrInvalid)
	_, err = e.svc.IssueSetupLink(ctx, admin, "alice", "")
	wantClass(t, "a setup link for a realm user", err, ErrInvalid)
	_, err = e.svc.Login(ctx, LoginRequest{User: "alice@local", Password: "alice-ldap-pw"})
	if err != errBadCredentials {
		t.Fatalf("alice through the local realm: got %v, want %v", err, errBadCredentials)
	}
}

// Failed directory sign-ins lock the name like failed local ones.
func TestLDAPRealmThrottled(t *testing.T) {
	d := testutil.StartSlapd(t, testDirectory)
	e := newRealmEnv(t, ldapRealm(t, d, "corp", false))
	ctx := context.Background()
	for i := 0; i < DefaultUserThrottle.Free; i++ {
		_, err := e.svc.Login(ctx, LoginRequest{User: "alice@corp", Password: "guess", RemoteAddr: "203.0.113.9"})
		if err != errBadCredentials {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	_, err := e.svc.Login(ctx, LoginRequest{User: "alice@corp", Password: "alice-ldap-pw", RemoteAddr: "203.0.113.10"})
	wantClass(t, "the right password after too many guesses", err, ErrLocked)
}
