package configops

import "github.com/coffer-backup/coffer/internal/configobj"

// noConsole says why the web console offers no page or action for a verb
// (list, get, create, update, delete) on a kind of configuration object,
// "" where it has one: the Policies and Notifications pages edit theirs,
// the Connections page the connections, the Repositories page the
// repositories, the Media page the libraries, and the Settings page the
// engine's settings, the maintenance schedules and windows, the
// replications and the failover plans. A kind added without a console page, and without a
// reason here, fails cmd/coffer's faces test.
func noConsole(verb string, k configobj.Kind) string {
	listedWhole := k == configobj.Limits || k == configobj.LatencyControl || k == configobj.ResourceGroup || k == configobj.StorageProvider ||
		k == configobj.MaintenanceWindow || k == configobj.MaintenanceSchedule || k == configobj.Connection || k == configobj.Repository || k == configobj.MediaLibrary ||
		k == configobj.Replication || k == configobj.FailoverPlan
	switch {
	case listedWhole && verb == "get":
		return "its console page lists each with its whole specification and source, which a get would only repeat"
	case k == configobj.Policy && verb == "list":
		return "the Policies page lists them through check-policies, which adds each one's findings and next runs"
	}
	return ""
}
