package failover

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSocketsOfALongStateDirectory: a test failover's VM in a state
// directory whose path is too long for a unix socket gets a short
// directory that a socket can be made in, linked from its run directory;
// RemoveLeftovers, finding the killed run, removes that directory too.
func TestSocketsOfALongStateDirectory(t *testing.T) {
	state := filepath.Join(t.TempDir(), strings.Repeat("a-long-state-directory-", 5))
	vmDir := filepath.Join(rehearsalRoot(state), "run1", "1.0")
	if err := os.MkdirAll(vmDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if n := len(filepath.Join(vmDir, "qmp.sock")); n <= maxSocketPath {
		t.Fatalf("the test's directory is only %d bytes long: it proves nothing", n)
	}
	dir, err := shortSocketDir(vmDir)
	if err != nil {
		t.Fatal(err)
	}
	if socketDirOf(vmDir) != dir {
		t.Fatalf("the VM's link names %s, want %s", socketDirOf(vmDir), dir)
	}
	sock := filepath.Join(dir, strings.Repeat("c", socketRoom-len(".sock")-1)+".sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("a socket in the short directory: %v", err)
	}
	_ = l.Close()
	RemoveLeftovers(context.Background(), state, nil)
	for _, p := range []string{dir, filepath.Dir(vmDir)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s is left: %v", p, err)
		}
	}
}
