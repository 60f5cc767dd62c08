package testutil

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Libvirtd is a private libvirtd a test started: a session-mode daemon
// (qemu:///session) running as the unprivileged user nobody, with its
// configuration, runtime and state directories under Dir. Why session mode:
// a root (system-mode) libvirtd keeps its state in fixed places
// (/run/libvirt, /var/lib/libvirt, /etc/libvirt), so two of them, or one
// and the machine's own, would share domains and pid files. Session mode
// takes every directory from the XDG_* variables.
type Libvirtd struct {
	Dir     string // everything of this daemon; short, for unix socket paths
	Socket  string
	URI     string // qemu:///session?socket=...
	UID     int
	GID     int
	cmd     *exec.Cmd
	log     *LockedBuffer
	exited  chan struct{}
	exitErr error
}

// LockedBuffer collects a child process's output while tests read it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// libvirtdUser is the unprivileged account the test daemons run as.
const libvirtdUser = 65534 // nobody

// libvirtCache is shared by the daemons of all tests: the QEMU
// capabilities probe takes seconds and depends only on the QEMU binary
// (libvirt invalidates its cache when the binary changes).
var libvirtCacheOnce sync.Once

// StartLibvirtd starts a private libvirtd for t and stops it, and every
// QEMU it started, when t ends.
func StartLibvirtd(t testing.TB) *Libvirtd {
	t.Helper()
	RequireRoot(t) // to run the daemon as another user
	bin := RequireBinary(t, "libvirtd")
	RequireBinary(t, "qemu-system-x86_64")
	l, err := LaunchLibvirtd(bin)
	if l != nil {
		t.Cleanup(func() {
			l.Stop()
			if t.Failed() {
				t.Logf("libvirtd log:\n%s", l.log.String())
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// LaunchLibvirtd starts a private libvirtd from bin (benchmarks use it
// too); Stop stops it.
func LaunchLibvirtd(bin string) (*Libvirtd, error) {
	dir, err := os.MkdirTemp("", "lv")
	if err != nil {
		return nil, err
	}
	l := &Libvirtd{Dir: dir, UID: libvirtdUser, GID: libvirtdUser, log: &LockedBuffer{}, exited: make(chan struct{})}
	cache := filepath.Join(os.TempDir(), "coffer-libvirtd-cache")
	libvirtCacheOnce.Do(func() {
		_ = os.MkdirAll(cache, 0o700) // only a cache: libvirtd works without it
		l.Chown(cache)
	})
	for _, d := range []string{"c/libvirt", "r", "h"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			_ = os.RemoveAll(dir) // best effort after the error returned
			return nil, err
		}
	}
	// stdio_handler file: no virtlogd; the log to stderr: the test shows
	// it when the daemon fails.
	files := map[string]string{
		"c/libvirt/qemu.conf":     "stdio_handler = \"file\"\n",
		"c/libvirt/libvirtd.conf": "log_outputs = \"3:stderr\"\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			_ = os.RemoveAll(dir) // best effort after the error returned
			return nil, err
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := l.ChownAll(dir); err != nil {
		_ = os.RemoveAll(dir) // best effort after the error returned
		return nil, err
	}
	l.Socket = filepath.Join(dir, "r", "libvirt", "libvirt-sock")
	l.URI = "qemu:///session?socket=" + l.Socket
	l.cmd = exec.Command(bin)
	l.cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + filepath.Join(dir, "h"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "c"), "XDG_CACHE_HOME=" + cache, "XDG_RUNTIME_DIR=" + filepath.Join(dir, "r")}
	l.cmd.Dir = dir
	l.cmd.Stdout, l.cmd.Stderr = l.log, l.log
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(l.UID), Gid: uint32(l.GID)}, Setpgid: true}
	if err := l.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir) // best effort after the error returned
		return nil, err
	}
	go func() { l.exitErr = l.cmd.Wait(); close(l.exited) }()
	// The first start probes QEMU's capabilities (seconds on a busy
	// machine); later ones read the cache.
	deadline := time.Now().Add(90 * time.Second)
	for {
		if c, err := net.Dial("unix", l.Socket); err == nil {
			_ = c.Close() // a probe: listening is all it asks
			return l, nil
		}
		select {
		case <-l.exited:
			return l, fmt.Errorf("libvirtd exited before it listened: %v\n%s", l.exitErr, l.log.String())
		default:
		}
		if time.Now().After(deadline) {
			return l, fmt.Errorf("libvirtd not listening on %s after 90 s:\n%s", l.Socket, l.log.String())
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// Stop kills the QEMU processes of the daemon's domains (they outlive
// libvirtd), then the daemon, and removes its directory.
func (l *Libvirtd) Stop() {
	pids, _ := filepath.Glob(filepath.Join(l.Dir, "r", "libvirt", "qemu", "run", "*.pid"))
	for _, p := range pids {
		_ = killPIDFile(p) // best effort: the daemon's teardown follows
	}
	_ = l.cmd.Process.Signal(syscall.SIGTERM) // fails only if it has exited already
	select {
	case <-l.exited:
	case <-time.After(30 * time.Second):
		_ = l.cmd.Process.Kill()
		<-l.exited
	}
	_ = os.RemoveAll(l.Dir) // the test's temporary directory
}

// Chown gives path to the daemon's user, so that the QEMU it starts can
// open disk images, kernels and sockets the test created.
func (l *Libvirtd) Chown(path string) {
	_ = os.Lchown(path, l.UID, l.GID) // a file the daemon cannot open fails its test with the reason
}

// ChownAll gives a whole tree to the daemon's user.
func (l *Libvirtd) ChownAll(root string) error {
	return filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, l.UID, l.GID)
	})
}

// Log is what the daemon printed so far.
func (l *Libvirtd) Log() string { return l.log.String() }
