package console

import "github.com/coffer-backup/coffer/internal/api"

// The upgrade check (check-upgrade, as `coffer upgrade check`): before
// another version of coffer is installed, what this one would migrate
// and what of other versions shares the catalog and the repositories.
// It changes nothing.
func (p *page) upgradePage() {
	var u api.UpgradeCheck
	if _, err := p.api.call("check-upgrade", nil, nil, nil, &u); err != nil {
		p.fail(err)
		return
	}
	p.show("upgrade", "Upgrade check", "settings", u)
}
