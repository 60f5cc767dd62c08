package policy

import (
	"strings"
	"testing"
)

// TestMediaLibraries: the media-libraries section is decoded and checked
// with messages naming the library and the key; edits put and delete
// libraries like the other objects.
func TestMediaLibraries(t *testing.T) {
	c, err := load(t, "media-libraries:\n  - {name: vtl1, kind: vtl, directory: /srv/vtl}\n")
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := c.MediaLibrary("vtl1"); !ok || l.Kind != "vtl" || l.Directory != "/srv/vtl" {
		t.Fatalf("vtl1: %+v %v", l, ok)
	}
	robot, err := load(t, "media-libraries:\n  - name: robot\n    kind: mtx\n    changer: /dev/sg3\n"+
		"    drives: [{number: 1, device: /dev/nst1}, {number: 0, device: /dev/nst0}]\n    drive-limit: 1\n")
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := robot.MediaLibrary("robot"); l.Changer != "/dev/sg3" || l.DriveLimit != 1 ||
		l.DriveDevices()[0] != "/dev/nst0" || l.DriveDevices()[1] != "/dev/nst1" {
		t.Fatalf("robot: %+v", l)
	}
	for doc, want := range map[string]string{
		"media-libraries: [{name: a, directory: /x}]":                                                                                          "media library a: kind is missing (vtl, mtx)",
		"media-libraries: [{name: a, kind: lto}]":                                                                                              `media library a: kind: "lto" is not one of vtl, mtx`,
		"media-libraries: [{name: a, kind: vtl}]":                                                                                              "media library a: directory is missing",
		"media-libraries: [{name: a, kind: vtl, directory: vtl}]":                                                                              `media library a: directory "vtl" is not an absolute path`,
		"media-libraries: [{name: a, kind: vtl, directory: /x}, {name: a}]":                                                                    "media library a is defined twice",
		"media-libraries: [{kind: vtl, directory: /x}]":                                                                                        "media library #1: name is missing",
		"media-libraries: [{name: a, kind: vtl, directory: /x, drives: [{number: 0, device: /dev/nst0}]}]":                                     "media library a: changer and drives belong to a real library (kind: mtx)",
		"media-libraries: [{name: a, kind: vtl, directory: /x, drive-limit: -1}]":                                                              "media library a: drive-limit must not be negative",
		"media-libraries: [{name: a, kind: mtx, drives: [{number: 0, device: /dev/nst0}]}]":                                                    "media library a: changer is missing (the changer's SCSI generic device",
		"media-libraries: [{name: a, kind: mtx, changer: sg3, drives: [{number: 0, device: /dev/nst0}]}]":                                      `media library a: changer "sg3" is not a device path`,
		"media-libraries: [{name: a, kind: mtx, changer: /dev/sg3}]":                                                                           "media library a: drives are missing: name each drive's st device by the changer's drive number",
		"media-libraries: [{name: a, kind: mtx, changer: /dev/sg3, directory: /x, drives: [{number: 0, device: /dev/nst0}]}]":                  "media library a: directory belongs to a virtual tape library (kind: vtl)",
		"media-libraries: [{name: a, kind: mtx, changer: /dev/sg3, drives: [{number: 1}]}]":                                                    "media library a: drives[0]: device is missing (drive 1's non-rewinding st device, like /dev/nst1)",
		"media-libraries: [{name: a, kind: mtx, changer: /dev/sg3, drives: [{number: -1, device: /dev/nst0}]}]":                                "media library a: drives[0]: number -1 is negative",
		"media-libraries: [{name: a, kind: mtx, changer: /dev/sg3, drives: [{number: 0, device: nst0}]}]":                                      `media library a: drives[0]: device "nst0" is not a device path`,
		"media-libraries: [{name: a, kind: mtx, changer: /dev/sg3, drives: [{number: 0, device: /dev/nst0}, {number: 0, device: /dev/nst1}]}]": "media library a: drives[1]: drive 0 is named twice",
		"media-libraries: [{name: a, kind: mtx, changer: /dev/sg3, drives: [{number: 0, device: /dev/nst0}, {number: 1, device: /dev/nst0}]}]": "media library a: drives[1]: device /dev/nst0 is also drive 0's",
		"media-libraries: [{name: a, kind: mtx, changer: /dev/sg3, drives: [{number: 0, device: /dev/nst0}], drive-limit: 2}]":                 "media library a: drive-limit 2 is more than its 1 drive(s)",
		"media-libraries: [{name: a, kind: mtx, changer: /dev/sg3, drives: [{drive: 0, device: /dev/nst0}]}]":                                  `unknown key "drive" in media-libraries[0].drives[0]`,
	} {
		if _, err := load(t, doc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v\nwant %s", doc, err, want)
		}
	}

	n, err := c.PutMediaLibrary(MediaLibrary{Name: "vtl2", Kind: "vtl", Directory: "/srv/vtl2"})
	if err != nil || len(n.MediaLibraries) != 2 || len(c.MediaLibraries) != 1 {
		t.Fatalf("put a library: %+v %v", n.MediaLibraries, err)
	}
	if _, err := c.PutMediaLibrary(MediaLibrary{Name: "bad", Kind: "vtl"}); err == nil || !strings.Contains(err.Error(), "media library bad: directory is missing") {
		t.Fatalf("an invalid library: %v", err)
	}
	if n, err = n.DeleteMediaLibrary("vtl1"); err != nil || len(n.MediaLibraries) != 1 || n.MediaLibraries[0].Name != "vtl2" {
		t.Fatalf("delete a library: %+v %v", n, err)
	}
	if _, err := c.DeleteMediaLibrary("nope"); err == nil || !strings.Contains(err.Error(), `no media library is named "nope"`) {
		t.Fatalf("delete a missing library: %v", err)
	}
}
