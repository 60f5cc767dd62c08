package cli

import (
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/policy"
)

// checkSections decodes every structured section of the configuration file
// with its owner's schema, whatever the command, so an unknown key in any
// section is an error (exit 2) like an unknown top-level key, and no
// section is accepted and then ignored. What the sections say is checked
// by the commands that use them (engineConfig, policyConfig).
func checkSections(f *config.File) error {
	if _, err := policy.Decode(f); err != nil {
		return err
	}
	if _, err := notify.Decode(f); err != nil {
		return err
	}
	var s serverSettings
	return f.Decode("server", &s)
}
