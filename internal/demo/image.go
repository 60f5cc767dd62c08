// Package demo runs coffer's main job end to end on embedded defaults, for
// the README's quick start: a real machine's disk is backed up into a fresh
// local repository, changed, backed up again, restored and checked.
package demo

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// MakeDiskImage builds a sparse raw disk holding an ext4 filesystem with a
// small tree of files (text, binaries copied from /usr/bin, random data),
// without mounting anything (mkfs.ext4 -d).
func MakeDiskImage(dir, path string, sizeMiB int) error {
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(tree, "etc"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(tree, "srv", "data"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tree, "etc", "motd"), []byte("welcome to the coffer demo machine\n"), 0o644); err != nil {
		return err
	}
	noise := make([]byte, 8<<20)
	_, _ = rand.Read(noise)
	if err := os.WriteFile(filepath.Join(tree, "srv", "data", "random.bin"), noise, 0o600); err != nil {
		return err
	}
	for _, bin := range []string{"/usr/bin/bash", "/usr/bin/ls", "/usr/bin/tar"} {
		if b, err := os.ReadFile(bin); err == nil {
			_ = os.WriteFile(filepath.Join(tree, "srv", filepath.Base(bin)), b, 0o755)
		}
	}
	out, err := exec.Command("mkfs.ext4", "-q", "-F", "-d", tree, path, fmt.Sprintf("%dM", sizeMiB)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4: %v: %s", err, out)
	}
	return os.RemoveAll(tree)
}
