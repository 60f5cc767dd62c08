package console_test

import (
	"path/filepath"
	"testing"
)

// TestConsoleMediaLibrariesConfigured: the Media page goes through the
// shared editor (configTrip): a virtual tape library added is stored
// through the API and listed at once with its drives and slots; the same
// name again is refused as existing, and a key the file's libraries do
// not have with the API's reason. It is changed at the version read,
// then deleted.
func TestConsoleMediaLibrariesConfigured(t *testing.T) {
	l := newLab(t)
	tapes := filepath.Join(l.dir, "vtl")
	l.coffer("init")
	l.coffer("media", "vtl", "create", tapes, "--drives", "1", "--slots", "2", "--capacity", "32MiB")
	l.coffer("media", "vtl", "add", tapes, "CFR001L8", "--slot", "1")
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/media")
	c.waitText("#no-libraries", "No media library is configured")
	spec := "name: tapes\nkind: vtl\ndirectory: " + tapes + "\n"
	c.trip(configTrip{Kind: "media-library", Page: "/ui/media", API: "/api/v1/media/libraries/",
		Name: "tapes", Spec: spec, Stored: [2]string{"directory", tapes},
		Refused: []refusal{
			exists("media-library", "tapes", spec),
			{Spec: "name: typo\nkind: vtl\ndirectory: " + tapes + "\ndrive-limt: 1\n", Says: "drive-limt", Refused: "typo"},
		},
		Added: func() {
			// Listed with its drives and slots as soon as it is added.
			c.waitText("#slots-tapes", "CFR001L8")
			c.shot("media-libraries")
		},
		Change: "kind: vtl\ndirectory: " + tapes + "\ndrive-limit: 1\n", Changed: [2]string{"drive-limit", "1"}})
}
