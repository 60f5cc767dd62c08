package command

import (
	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/configobj"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/server"
)

// NotifyServiceManager tells systemd how the service is, in sd_notify's
// words (READY=1 once it serves, RELOADING=1, STOPPING=1, STATUS=...),
// when it runs in a unit of Type=notify (the packages' coffer.service and
// coffer-worker.service). Elsewhere ($NOTIFY_SOCKET unset) it does
// nothing.
func (a *App) NotifyServiceManager(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		a.Log.Warn("telling systemd the service's state failed", "state", state, "err", err)
	}
}

// ReadFileAgain reads the configuration file again (the one this process
// started with, or the standard places when it started without one) and
// returns its sections that a server reloads live. The whole file is
// decoded as at start, so a file with an unknown key is refused whole;
// its server: and maintenance: sections and top-level keys take effect at
// the next start only.
func (a *App) ReadFileAgain() (configobj.File, error) {
	path := ""
	if a.file != nil {
		path = a.file.Path
	}
	f, err := config.Load(path)
	if err != nil {
		return configobj.File{}, err
	}
	eng, err := policy.Decode(f)
	if err != nil {
		return configobj.File{}, err
	}
	nc, err := notify.Decode(f)
	if err != nil {
		return configobj.File{}, err
	}
	var st server.Settings
	if err := f.Decode("server", &st); err != nil {
		return configobj.File{}, err
	}
	if _, err := maintenance.Decode(f); err != nil {
		return configobj.File{}, err
	}
	// The maintenance section in effect stays the one read at start (it
	// is merged with the catalog's maintenance objects).
	return configobj.File{Path: f.Path, Engine: eng, Notify: nc, Maintenance: a.maint}, nil
}
