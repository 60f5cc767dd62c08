package service

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// FileRoots are the server's directories for files an API request names:
// a request names a path relative to one of them, never a path of its
// choice on the server (the command line takes any path: whoever runs it
// has the machine anyway).
type FileRoots struct {
	// RestoreDir receives restored disks, VMs, extracted files and
	// committed instant recoveries.
	RestoreDir string
	// ImageDir holds the disk images the API may back up.
	ImageDir string
	// ExportDir holds the unix sockets of NBD exports.
	ExportDir string
}

// HostPath is the path on this host that an operation's input names: on
// the command line (Config.Local) the path as given, whoever runs it has
// the machine anyway; on a server, rel confined under its root.
func (s *Service) HostPath(root, what, rel string) (string, error) {
	if s.Config.Local {
		return rel, nil
	}
	return Confine(root, what, rel)
}

// Confine resolves rel under root: it must be relative, must not climb
// out with "..", and no component on the way may be a symbolic link (a
// restore could have put one there to point outside).
func Confine(root, what, rel string) (string, error) {
	if root == "" {
		return "", api.Errorf(api.Invalid, "this server has no %s configured: the operation is not available through the API", what)
	}
	switch {
	case rel == "":
		return "", api.Errorf(api.Invalid, "no path given (a path relative to the server's %s)", what)
	case strings.ContainsRune(rel, 0):
		return "", api.Errorf(api.Invalid, "path %q holds a NUL byte", rel)
	case filepath.IsAbs(rel):
		return "", api.Errorf(api.Invalid, "path %q is absolute: give a path relative to the server's %s", rel, what)
	}
	for _, c := range strings.Split(filepath.ToSlash(rel), "/") {
		if c == ".." {
			return "", api.Errorf(api.Invalid, "path %q climbs out of the server's %s with \"..\"", rel, what)
		}
	}
	full := filepath.Join(root, rel)
	cur := filepath.Clean(root)
	for _, c := range strings.Split(filepath.ToSlash(filepath.Clean(rel)), "/") {
		if c == "." || c == "" {
			continue
		}
		cur = filepath.Join(cur, c)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", api.Errorf(api.Invalid, "path %q in the server's %s: %v", rel, what, err) // a name too long, ...
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", api.Errorf(api.Invalid, "path %q passes through a symbolic link in the server's %s", rel, what)
		}
	}
	return full, nil
}

const RestoreDir = "restore directory (server.restore-dir)"

// InsidePath checks a path inside a backed-up file system that a
// request names (the command line's, Config.Local, go as given): the file
// system's reader resolves it from its root whatever it says, but a path
// that climbs with ".." is a mistake (or an attempt) worth telling.
func (s *Service) InsidePath(p string) error {
	if s.Config.Local {
		return nil
	}
	return InsidePath(p)
}

// InsidePath refuses a NUL byte and ".." in a path inside a backed-up
// file system.
func InsidePath(p string) error {
	if strings.ContainsRune(p, 0) {
		return api.Errorf(api.Invalid, "path %q holds a NUL byte", p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return api.Errorf(api.Invalid, "path %q climbs with \"..\": name paths from the file system's root", p)
		}
	}
	return nil
}
