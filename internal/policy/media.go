package policy

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
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
//	  - name: robot
//	    kind: mtx                  # a real changer, driven through mtx
//	    changer: /dev/sg3          # its SCSI generic device (lsscsi -g)
//	    drives:                    # its st drives, by the changer's drive number
//	      - {number: 0, device: /dev/nst0}
//	      - {number: 1, device: /dev/nst1}
//	    drive-limit: 1             # drives written at once (default: all)
type MediaLibrary struct {
	Name string `yaml:"name"`
	Kind string `yaml:"kind"`
	// Directory is a virtual tape library's directory.
	Directory string `yaml:"directory"`
	// Changer is a real library's changer device (/dev/sgN), which mtx
	// drives.
	Changer string `yaml:"changer"`
	// Drives are a real library's drives.
	Drives []MediaDrive `yaml:"drives"`
	// DriveLimit bounds the drives of the library written at once, by
	// every copy of this process together (0: all of them): a slot pool
	// of the engine's limits, "library:NAME".
	DriveLimit int `yaml:"drive-limit"`
}

// MediaDrive is a drive of a real library: the changer's number for it
// (mtx's data transfer element, from 0) and its non-rewinding st device.
type MediaDrive struct {
	Number int    `yaml:"number"`
	Device string `yaml:"device"`
}

// The kinds a library of the configuration may be.
const (
	MediaVTL = "vtl"
	MediaMtx = "mtx"
)

// MediaLibraryKinds are the kinds a library of the configuration may be.
var MediaLibraryKinds = []string{MediaVTL, MediaMtx}

// MediaLibrary returns the library with that name.
func (c *Config) MediaLibrary(name string) (MediaLibrary, bool) {
	for _, l := range c.MediaLibraries {
		if l.Name == name {
			return l, true
		}
	}
	return MediaLibrary{}, false
}

// DriveDevices maps a real library's drive numbers to their devices.
func (l MediaLibrary) DriveDevices() map[int]string {
	out := make(map[int]string, len(l.Drives))
	for _, d := range l.Drives {
		out[d.Number] = d.Device
	}
	return out
}

// Validate checks one library as Config.Validate does, for an operation
// that uses it without the rest of the configuration.
func (l MediaLibrary) Validate() error {
	var errs []error
	l.validate(func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) })
	return errors.Join(errs...)
}

func (l MediaLibrary) validate(add func(string, ...any)) {
	where := "media library " + l.Name
	if l.DriveLimit < 0 {
		add("%s: drive-limit must not be negative (leave it out to write with every drive at once)", where)
	}
	switch l.Kind {
	case "":
		add("%s: kind is missing (%s)", where, strings.Join(MediaLibraryKinds, ", "))
	case MediaVTL:
		l.validateVTL(where, add)
	case MediaMtx:
		l.validateMtx(where, add)
	default:
		add("%s: kind: %q is not one of %s (vtl: a virtual tape library's directory; mtx: a real changer and its st drives)",
			where, l.Kind, strings.Join(MediaLibraryKinds, ", "))
	}
}

func (l MediaLibrary) validateVTL(where string, add func(string, ...any)) {
	if l.Changer != "" || len(l.Drives) > 0 {
		add("%s: changer and drives belong to a real library (kind: mtx); a virtual tape library has only its directory, "+
			"whose drives coffer media vtl create made", where)
	}
	switch {
	case l.Directory == "":
		add("%s: directory is missing (the virtual tape library's directory, made with coffer media vtl create)", where)
	case !filepath.IsAbs(config.ExpandHome(l.Directory)):
		add("%s: directory %q is not an absolute path: a server resolves it whatever its working directory", where, l.Directory)
	}
}

func (l MediaLibrary) validateMtx(where string, add func(string, ...any)) {
	if l.Directory != "" {
		add("%s: directory belongs to a virtual tape library (kind: vtl); a real library names its changer and drives", where)
	}
	switch {
	case l.Changer == "":
		add("%s: changer is missing (the changer's SCSI generic device, like /dev/sg3: `lsscsi -g` lists it as a mediumx)", where)
	case !filepath.IsAbs(l.Changer):
		add("%s: changer %q is not a device path (like /dev/sg3)", where, l.Changer)
	}
	if len(l.Drives) == 0 {
		add("%s: drives are missing: name each drive's st device by the changer's drive number, "+
			"like drives: [{number: 0, device: /dev/nst0}] (`mtx -f CHANGER status` numbers the drives, `lsscsi -g` lists the devices)", where)
	}
	numbers, devices := map[int]bool{}, map[string]int{}
	for i, d := range l.Drives {
		at := where + ": drives[" + strconv.Itoa(i) + "]"
		switch {
		case d.Number < 0:
			add("%s: number %d is negative: the changer numbers its drives from 0", at, d.Number)
		case numbers[d.Number]:
			add("%s: drive %d is named twice: give each of the changer's drives once", at, d.Number)
		}
		numbers[d.Number] = true
		switch {
		case d.Device == "":
			add("%s: device is missing (drive %d's non-rewinding st device, like /dev/nst%d)", at, d.Number, max(d.Number, 0))
		case !filepath.IsAbs(d.Device):
			add("%s: device %q is not a device path (like /dev/nst0)", at, d.Device)
		default:
			if other, ok := devices[d.Device]; ok && other != d.Number {
				add("%s: device %s is also drive %d's: each drive has its own st device", at, d.Device, other)
			}
			devices[d.Device] = d.Number
		}
	}
	if l.DriveLimit > len(l.Drives) && len(l.Drives) > 0 {
		add("%s: drive-limit %d is more than its %d drive(s): leave it out to write with every drive at once", where, l.DriveLimit, len(l.Drives))
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
