package cli

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/metrics"
	"github.com/coffer-backup/coffer/internal/service"
)

// serverSettings is the schema of the configuration file's server:
// section. `coffer server` reads nothing of its own today: what it runs
// comes from the connections, repositories, limits, resource-groups and
// policies sections and the top-level catalog, state-dir and log-* keys.
// So the section takes no key, and each one given is an error naming the
// section; the REST API's and metrics endpoint's settings join this type
// with them.
type serverSettings struct{}

func (a *app) cmdServer() *cobra.Command {
	return faceOnly(&cobra.Command{
		Use:   "server",
		Short: "run backup policies on their schedules (the coffer daemon)",
		Long: manual(`Run every policy that has a schedule (cron syntax or @daily, @every 4h, ...)
until stopped with SIGTERM or Ctrl-C. The policies are those in effect:
the configuration file's and those created through the API (`+"`coffer config`"+`);
when one of those changes, here or on another server sharing the catalog,
the schedules, limits, notification targets and health checks reload
within seconds, and runs in progress go on; with no scheduled policy the
server waits for one. On start, leftovers of an earlier
coffer that died mid-backup (hypervisor snapshots, bitmaps, exports,
overlays) are found through the state directory's journals and removed.
A policy whose previous run still goes when its time comes is skipped,
and the skip is recorded. Jobs, tasks and events go to the catalog
(`+"`coffer jobs`"+`); logs are structured (--log-format json for collectors).

Beside them it runs the maintenance section's jobs (gc, verify, forget,
copy) on their schedules within their windows (the section is the file's,
read at start), checks protection (RPO,
repository usage, lapsing locks) for its metrics and notifications, and
delivers notifications. Several servers may share a PostgreSQL catalog: the
one holding its schedules lease runs the schedules, each run once, and
another takes over within maintenance.takeover-after when it dies.

Stopping the server cancels running jobs cleanly: VMs in flight release
their snapshots, queued VMs are not started.

The REST API, web UI and metrics endpoint are the server's next step; they
call the same service layer as this command line.`,
			"Nothing on stdout: the server logs (stderr) what it starts and how each job ends.",
			`coffer server
coffer server --log-format json --log-level info`,
			"0 when stopped; 2 when the configuration is refused at start."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The collectors of /metrics (a.metrics.Handler()), fed by the
			// service's tasks, health monitor and engine.
			a.metrics = metrics.New()
			_, err := call(a, func(s *service.Service) (struct{}, error) { return struct{}{}, s.RunSchedules(cmd.Context()) })
			return err
		},
	}, "the server itself: it runs the schedules and will serve the API")
}
