package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/config"
)

// MediaLibrary is a tape library of the configuration (the
// media-libraries section), so that the API and the console name a
// library rather than a directory or a device of the server's host:
//
//	media-libraries:
//	  - name: vtl1
//	    kind: vtl                  # a file-backed virtual tape library
//	    directory: /srv/vtl        # made with coffer media vtl create
//
// A real library will be the same entry with kind mtx, its changer
// (/dev/sgN) and its st drives (/dev/nstN, by the changer's drive number);
// until then the command line reaches one with --library
// mtx:CHANGER:DEVICE.
type MediaLibrary struct {
	Name string `yaml:"name"`
	Kind string `yaml:"kind"`
	// Directory is a virtual tape library's directory.
	Directory string `yaml:"directory"`
}

// MediaLibraryKinds are the kinds a library of the configuration may be.
var MediaLibraryKinds = []string{"vtl"}

// MediaLibrary returns the library with that name.
func (c *Config) MediaLibrary(name string) (MediaLibrary, bool) {
	for _, l := range c.MediaLibraries {
		if l.Name == name {
			return l, true
		}
	}
	return MediaLibrary{}, false
}

func (l MediaLibrary) validate(add func(string, ...any)) {
	where := "media library " + l.Name
	switch {
	case l.Kind == "":
		add("%s: kind is missing (%s)", where, strings.Join(MediaLibraryKinds, ", "))
	case !slices.Contains(MediaLibraryKinds, l.Kind):
		add("%s: kind: %q is not one of %s (a changer driven through mtx is reached from the command line with --library mtx:CHANGER:DEVICE)",
			where, l.Kind, strings.Join(MediaLibraryKinds, ", "))
	case l.Directory == "":
		add("%s: directory is missing (the virtual tape library's directory, made with coffer media vtl create)", where)
	case !filepath.IsAbs(config.ExpandHome(l.Directory)):
		add("%s: directory %q is not an absolute path: a server resolves it whatever its working directory", where, l.Directory)
	}
}

// PutMediaLibrary adds l, or replaces the library of the same name.
func (c *Config) PutMediaLibrary(l MediaLibrary) (*Config, error) {
	n := c.clone()
	n.MediaLibraries = put(n.MediaLibraries, l, func(y MediaLibrary) string { return y.Name })
	return n, n.Validate()
}

// DeleteMediaLibrary removes a library. Its volumes stay in the media
// catalogue, under the library's name.
func (c *Config) DeleteMediaLibrary(name string) (*Config, error) {
	n := c.clone()
	i := slices.IndexFunc(n.MediaLibraries, func(x MediaLibrary) bool { return x.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("no media library is named %q", name)
	}
	n.MediaLibraries = slices.Delete(n.MediaLibraries, i, i+1)
	return n, n.Validate()
}
