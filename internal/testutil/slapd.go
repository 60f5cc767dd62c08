package testutil

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Slapd is an OpenLDAP server (Debian's slapd, scripts/ci/install-ldap.sh)
// on loopback, with its database, configuration and TLS files in the
// test's temporary directory. It serves plain LDAP (for StartTLS) and
// LDAPS with a certificate of a throwaway CA.
type Slapd struct {
	// URL is ldap://127.0.0.1:PORT (StartTLS), LDAPSURL
	// ldaps://127.0.0.1:PORT.
	URL, LDAPSURL string
	// TLS are the CA and the server's certificate.
	TLS TLSFiles
	// Suffix is the directory's root ("dc=coffer,dc=test"); AdminDN
	// and AdminPassword its root account.
	Suffix, AdminDN, AdminPassword string
	log                            *LockedBuffer
}

// The test directory's suffix and root account.
const (
	SlapdSuffix        = "dc=coffer,dc=test"
	SlapdAdminDN       = "cn=admin," + SlapdSuffix
	SlapdAdminPassword = "slapd-admin-secret"
)

// slapdADSchema declares Active Directory's attributes that coffer reads
// (under AD's own OIDs) on an auxiliary class, so that an entry of the
// test directory can look like an AD user.
const slapdADSchema = `attributetype ( 1.2.840.113556.1.4.221 NAME 'sAMAccountName'
	EQUALITY caseIgnoreMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 SINGLE-VALUE )
attributetype ( 1.2.840.113556.1.4.8 NAME 'userAccountControl'
	EQUALITY integerMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.27 SINGLE-VALUE )
attributetype ( 1.2.840.113556.1.2.102 NAME 'memberOf'
	EQUALITY distinguishedNameMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.12 )
objectclass ( 1.3.6.1.4.1.99999.1.1 NAME 'cofferTestADUser' SUP top AUXILIARY
	MAY ( sAMAccountName $ userAccountControl $ memberOf ) )
`

// StartSlapd starts slapd with the entries of ldif (below Suffix, whose
// own entry it adds) loaded, and stops it when the test ends. A missing
// slapd skips the test, or fails it in CI.
func StartSlapd(t testing.TB, ldif string) *Slapd {
	t.Helper()
	bin, slapadd := requireSbin(t, "slapd"), requireSbin(t, "slapadd")
	dir := t.TempDir()
	s := &Slapd{TLS: NewTLSFiles(t, dir), Suffix: SlapdSuffix, AdminDN: SlapdAdminDN, AdminPassword: SlapdAdminPassword,
		log: &LockedBuffer{}}
	conf := s.writeConfig(t, dir)
	root := fmt.Sprintf("dn: %s\nobjectClass: dcObject\nobjectClass: organization\ndc: coffer\no: coffer test\n\n", SlapdSuffix)
	load := exec.Command(slapadd, "-f", conf, "-q")
	load.Stdin = strings.NewReader(root + ldif)
	if out, err := load.CombinedOutput(); err != nil {
		t.Fatalf("slapadd: %v\n%s", err, out)
	}
	plain, ldaps := freeLoopbackPort(t), freeLoopbackPort(t)
	s.URL, s.LDAPSURL = "ldap://127.0.0.1:"+plain, "ldaps://127.0.0.1:"+ldaps
	// -d keeps slapd in the foreground, logging to stderr; "slapd
	// starting" is written once it listens.
	cmd := exec.Command(bin, "-f", conf, "-h", s.URL+"/ "+s.LDAPSURL+"/", "-d", "256")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("slapd: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if err := s.awaitStart(stderr); err != nil {
		t.Fatalf("slapd did not start: %v\n%s", err, s.log.String())
	}
	return s
}

func (s *Slapd) writeConfig(t testing.TB, dir string) string {
	t.Helper()
	db := filepath.Join(dir, "db")
	if err := os.Mkdir(db, 0o700); err != nil {
		t.Fatal(err)
	}
	schema := filepath.Join(dir, "ad.schema")
	if err := os.WriteFile(schema, []byte(slapdADSchema), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include %s
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile %s
TLSCACertificateFile %s
TLSCertificateFile %s
TLSCertificateKeyFile %s
database mdb
maxsize 16777216
suffix "%s"
rootdn "%s"
rootpw %s
directory %s
access to attrs=userPassword by self =xw by anonymous auth by * none
access to * by users read by * none
`, schema, filepath.Join(dir, "slapd.pid"), s.TLS.CA, s.TLS.Cert, s.TLS.Key, SlapdSuffix, SlapdAdminDN,
		SlapdAdminPassword, db)
	path := filepath.Join(dir, "slapd.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// awaitStart reads slapd's log until it says it started (or exits).
func (s *Slapd) awaitStart(stderr io.Reader) error {
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			fmt.Fprintln(s.log, sc.Text())
			if !once && strings.Contains(sc.Text(), "slapd starting") {
				once = true
				close(started)
			}
		}
		if !once {
			close(started)
		}
	}()
	select {
	case <-started:
	case <-time.After(time.Minute):
		return fmt.Errorf("no \"slapd starting\" within a minute")
	}
	if !strings.Contains(s.log.String(), "slapd starting") {
		return fmt.Errorf("slapd exited")
	}
	return nil
}

// requireSbin is RequireBinary for a program in /usr/sbin, which is not
// in every user's PATH.
func requireSbin(t testing.TB, program string) string {
	t.Helper()
	if p := filepath.Join("/usr/sbin", program); fileExecutable(p) {
		return p
	}
	return RequireBinary(t, program)
}

func fileExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Log is what slapd has logged.
func (s *Slapd) Log() string { return s.log.String() }

// freeLoopbackPort is a port free on 127.0.0.1 a moment ago (a server
// that is told its port cannot take :0).
func freeLoopbackPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}
