package restorecmd_test

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/cli"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestInstantExport serves a backup point over NBD and checks it with
// real clients: qemu-img compare against the original image, nbdinfo.
func TestInstantExport(t *testing.T) {
	qemuImg := testutil.RequireBinary(t, "qemu-img")
	nbdinfo := testutil.RequireBinary(t, "nbdinfo")
	e := clitest.NewEnv(t)
	img := e.Image("m.raw", 48<<20, 6)
	e.Must("init")
	e.Must("backup", "disk", img, "--name", "m")
	for k, v := range e.Vars {
		t.Setenv(k, v)
	}
	sock := filepath.Join(e.Dir, "nbd.sock")
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- cli.Execute(ctx, []string{"instant", "export", "latest", "--listen", "unix:" + sock}, strings.NewReader(""), pw, io.Discard)
		pw.Close()
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("instant export exited %d", code)
		}
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil || !strings.Contains(line, "serving 1 disk") {
		t.Fatalf("no serving line: %q %v", line, err)
	}
	go io.Copy(io.Discard, pr)
	uri := "nbd+unix:///0?socket=" + sock
	if out, err := exec.Command(qemuImg, "compare", "-f", "raw", "-F", "raw", img, uri).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img compare: %v %s", err, out)
	}
	out, err := exec.Command(nbdinfo, "--map", uri).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hole,zero") || !strings.Contains(string(out), "data") {
		t.Fatalf("nbdinfo --map: %v %s", err, out)
	}
}
