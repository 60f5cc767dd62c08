// Package all is the one registry of media libraries: it opens a
// library an operation found (a virtual tape library's directory, or a
// real changer driven through mtx and its st drives) and says what of a
// library's configuration this server lacks. Every kind is named here
// explicitly, as restic's backend/all does for storage backends.
package all

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/media/volume"
	"github.com/coffer-backup/coffer/internal/media/vtl"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Library is a library as an operation found it: one of the
// configuration (Name set), or a directory or devices the command line
// named.
type Library struct {
	// Name is the configured library's name ("" for a path).
	Name string
	// Dir is a virtual tape library's directory; Changer and Devices (st
	// devices by the changer's drive numbers) a real library's.
	Dir, Changer string
	Devices      map[int]string
	Drive        int
	// DriveLimit is the configured library's drive-limit (0: none).
	DriveLimit int
}

// Ref is how the media catalogue and messages name the library: its
// name, or the path given.
func (l Library) Ref() string {
	switch {
	case l.Name != "":
		return l.Name
	case l.Dir != "":
		return l.Dir
	}
	return "mtx:" + l.Changer + ":" + l.Devices[l.Drive]
}

// Kind is the library's kind: vtl, or mtx for a changer and drive.
func (l Library) Kind() string {
	if l.Dir != "" {
		return "vtl"
	}
	return "mtx"
}

// Open opens a library found; close releases it (the VTL's lock).
func (l Library) Open() (lib *volume.Library, close func() error, err error) {
	libs, close, err := l.OpenDrives(1)
	if err != nil {
		return nil, nil, err
	}
	return libs[0], close, nil
}

// OpenDrives opens a library found with n of its drives, l.Drive and
// those after it, sharing its changer.
func (l Library) OpenDrives(n int) (libs []*volume.Library, close func() error, err error) {
	if l.Dir == "" {
		return l.openMtx(n)
	}
	v, err := vtl.Open(l.Dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && l.Name != "":
		return nil, nil, api.Errorf(api.NotFound, "media library %s: %v (is its directory a virtual tape library? coffer media vtl create makes one)", l.Name, err)
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, api.Errorf(api.NotFound, "no media library %q in the configuration, nor a virtual tape library's directory "+
			"(`coffer config list media-libraries` lists the libraries)", l.Dir)
	}
	if err != nil {
		return nil, nil, busy(l, err)
	}
	for i := l.Drive; i < l.Drive+n; i++ {
		d, err := v.Drive(i)
		if err != nil {
			_ = v.Close() // the library was only opened: the drive's error is the one to report
			if n > 1 {
				return nil, nil, invalidf("%d drives from drive %d: %v", n, l.Drive, err)
			}
			return nil, nil, invalidf("%v", err)
		}
		libs = append(libs, &volume.Library{Changer: v, Drive: d, DriveIndex: i})
	}
	return libs, v.Close, nil
}

// busy says that a library another operation holds is busy, not
// broken: one operation at a time drives a library.
func busy(l Library, err error) error {
	if errors.Is(err, media.ErrInUse) {
		return api.Errorf(api.Locked, "media library %s is in use by another operation (a copy, restore or verify that runs): try again when it has ended", l.Ref())
	}
	return err
}

func invalidf(format string, a ...any) error { return api.Errorf(api.Invalid, format, a...) }

// Warnings says when a virtual tape library's directory holds no
// library on this server, or a real library's devices or mtx are not
// here: the object is valid, using it here fails.
func Warnings(spec map[string]any) []string {
	if spec["kind"] == policy.MediaMtx {
		return mtxWarnings(spec)
	}
	dir, _ := spec["directory"].(string)
	if dir == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(config.ExpandHome(dir), "library.json")); err != nil {
		return []string{fmt.Sprintf("directory: %v: this server has no virtual tape library there, so using the library here fails "+
			"(make it with coffer media vtl create on every server that uses it)", err)}
	}
	return nil
}
