package console_test

import (
	"fmt"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
)

// TestConsoleUpgradeCheck: the upgrade check, reached from the Settings
// page, says what the API's check-upgrade says: ready, the catalog's
// schema against this coffer's, and each repository's format and state.
func TestConsoleUpgradeCheck(t *testing.T) {
	l := newLab(t)
	l.coffer("init")
	l.start()
	c := l.chrome()
	c.firstRun()

	var u api.UpgradeCheck
	if code := l.get(l.adminToken(), "/api/v1/upgrade/check", &u); code != 200 || len(u.Repositories) == 0 {
		t.Fatalf("check-upgrade (%d): %+v", code, u)
	}
	c.open("/ui/settings")
	c.follow("#upgrade-link")
	c.waitText("#upgrade-ready", "Ready:")
	c.waitText("#upgrade-catalog", fmt.Sprintf("schema %d of the %d this coffer knows", u.Catalog.Schema, u.Catalog.Known))
	for _, r := range u.Repositories {
		c.waitText("#upgrade-repo-"+r.Name, r.State)
	}
	c.waitText("#no-other-holders", "None.")
	c.shot("upgrade")
}
