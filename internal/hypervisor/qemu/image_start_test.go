package qemu

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeImageFailsWhenQemuNbdCannotStart: a qemu-nbd that exits at
// start (here, a format it does not know) is an error with its reason,
// not a probe waiting forever on the socket.
func TestServeImageFailsWhenQemuNbdCannotStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(file, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := ServeImage(context.Background(), file, "vmdk-flat", "", 1)
	if err == nil {
		srv.Stop()
		t.Fatal("qemu-nbd served a format it does not know")
	}
	if !strings.Contains(err.Error(), "vmdk-flat") {
		t.Fatalf("the error does not give qemu-nbd's reason: %v", err)
	}
}
