package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// PostgresBinDir finds the server binaries: Debian keeps them in
// /usr/lib/postgresql/<version>/bin (the newest wins), other systems put
// them on PATH. It skips (fails in CI) when there are none.
func PostgresBinDir(t testing.TB) string {
	t.Helper()
	if d := debianPostgresBinDir(); d != "" {
		return d
	}
	return filepath.Dir(RequireBinary(t, "initdb"))
}

// FindPostgresBinDir is PostgresBinDir for programs (benchmarks): an
// error instead of a skip.
func FindPostgresBinDir() (string, error) {
	if d := debianPostgresBinDir(); d != "" {
		return d, nil
	}
	p, err := exec.LookPath("initdb")
	if err != nil {
		return "", fmt.Errorf("PostgreSQL's server binaries are not installed (apt-get install postgresql): %w", err)
	}
	return filepath.Dir(p), nil
}

func debianPostgresBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// StartPostgres starts a throwaway PostgreSQL server on 127.0.0.1 for the
// test and returns the DSN of its "postgres" database (user "test", no
// password). Durability is off (fsync=off): the data dies with the test.
// The server stops when the test ends, and also if the test binary dies
// (parent-death signal), so no server outlives its test.
func StartPostgres(t testing.TB) string {
	t.Helper()
	bin := PostgresBinDir(t)
	dsn, stop, err := LaunchPostgres(bin, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return dsn
}

// LaunchPostgres starts PostgreSQL (binaries in bin) outside a test, for
// benchmarks, and returns the DSN of its "postgres" database (user "test",
// no password) and stop, which ends the server. With dir "" the data
// lives in a new temporary directory that stop removes; otherwise in dir,
// created at the first launch and kept (a benchmark's catalog survives
// for the next run); as root, the server runs as the postgres user, which
// must be able to reach dir (put it under /tmp). Durability is off (fsync=off), and the server dies
// with the launching process (parent-death signal).
func LaunchPostgres(bin, dir string) (dsn string, stop func(), err error) {
	return launchPostgres(bin, dir, "")
}

// StartPostgresOnLab is StartPostgres listening on the lab's gateway too,
// for processes on the lab's hosts: it returns the DSN at the gateway's
// address, and trusts the lab's addresses as it trusts 127.0.0.1.
func StartPostgresOnLab(t testing.TB, lab *NetLab) string {
	t.Helper()
	bin := PostgresBinDir(t)
	dsn, stop, err := launchPostgres(bin, "", lab.Gateway)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return dsn
}

// launchPostgres is LaunchPostgres, listening on also besides 127.0.0.1
// when it is not "" (its DSN is then at also).
func launchPostgres(bin, dir, also string) (dsn string, stop func(), err error) {
	// PostgreSQL refuses to run as root: run it as the postgres user, in
	// a directory under /tmp ($TMPDIR may be inside root's home, which
	// that user cannot enter).
	var cred *syscall.Credential
	parent := ""
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", nil, fmt.Errorf("running as root, but there is no postgres user to run the server as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		parent = "/tmp"
	}
	remove := func() {}
	if dir == "" {
		if dir, err = os.MkdirTemp(parent, "coffer-pg-"); err != nil {
			return "", nil, err
		}
		remove = func() { _ = os.RemoveAll(dir) }
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	fail := func(err error) (string, func(), error) { remove(); return "", nil, err }
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "test", "-A", "trust", "-E", "UTF8",
			"--locale=C", "--no-sync", "--no-instructions")
		initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		initdb.Dir = dir
		if out, err := initdb.CombinedOutput(); err != nil {
			return fail(fmt.Errorf("initdb: %v\n%s", err, out))
		}
	}
	host := "127.0.0.1"
	if also != "" {
		if err := trust(filepath.Join(data, "pg_hba.conf"), also); err != nil {
			return fail(err)
		}
		host = also
	}
	// A free port can be taken by someone else between the probe and
	// the server's bind: try a few.
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return fail(err)
		}
		stopServer, err := startPostgres(bin, dir, also, port, cred)
		if err == nil {
			return fmt.Sprintf("postgres://test@%s:%d/postgres?sslmode=disable", host, port),
				func() { stopServer(); remove() }, nil
		}
		lastErr = err
	}
	return fail(fmt.Errorf("start PostgreSQL: %v", lastErr))
}

// trust lets addr's /24 in without a password, as initdb's -A trust lets
// 127.0.0.1 (a lab's hosts, see StartPostgresOnLab).
func trust(hba, addr string) error {
	f, err := os.OpenFile(hba, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "host all all %s/24 trust\n", addr); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func startPostgres(bin, dir, also string, port int, cred *syscall.Credential) (stop func(), err error) {
	var log bytes.Buffer
	listen := "127.0.0.1"
	if also != "" {
		listen += "," + also
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", filepath.Join(dir, "data"), "-k", dir,
		"-h", listen, "-p", strconv.Itoa(port), "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready := exec.Command(filepath.Join(bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(port))
		if ready.Run() == nil {
			return stop, nil
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("postgres exited at startup:\n%s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("postgres not ready after 30 s:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
