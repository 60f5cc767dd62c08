package console_test

import (
	"path/filepath"
	"testing"
)

// TestConsoleRepositoriesConfigured: the Repositories page goes through
// the shared editor (configTrip): a repository added is stored through
// the API; the same name again is refused as existing, and a key the
// file's repositories do not have with the API's reason. Once its
// storage is made (coffer init --repo), the page lists it with its
// points, opened with the server's password. It is changed at the
// version read, then deleted.
func TestConsoleRepositoriesConfigured(t *testing.T) {
	l := newLab(t)
	l.coffer("init")
	l.start()
	c := l.chrome()
	c.firstRun()

	spare := filepath.Join(l.dir, "spare")
	c.trip(configTrip{Kind: "repository", Page: "/ui/repositories", API: "/api/v1/repositories/",
		Name: "spare", Spec: "name: spare\nlocation: " + spare + "\n", Stored: [2]string{"location", spare},
		Refused: []refusal{
			exists("repository", "spare", "name: spare\nlocation: "+spare+"-2\n"),
			{Spec: "name: typo\nlocaton: " + spare + "\n", Says: "locaton", Refused: "typo"},
		},
		Added: func() {
			// Its storage made on the server's host, the page opens it.
			l.coffer("init", "--repo", spare)
			c.open("/ui/repositories")
			c.waitText("#spare", "Points")
			c.shot("repositories-config")
		},
		Change: "location: " + spare + "\nstreams: 2\n", Changed: [2]string{"streams", "2"}})
}
