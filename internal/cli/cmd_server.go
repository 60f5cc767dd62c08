package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/policy"
)

// serverSettings is the schema of the configuration file's server:
// section. `coffer server` reads nothing of its own today: what it runs
// comes from the connections, repositories, limits, resource-groups and
// policies sections and the top-level catalog, state-dir and log-* keys.
// So the section takes no key, and each one given is an error naming the
// section (checkSections); the REST API's and metrics endpoint's settings
// join this type with them.
type serverSettings struct{}

func (a *app) cmdServer() *cobra.Command {
	return &cobra.Command{
		Use:   "server",
		Short: "run backup policies on their schedules (the coffer daemon)",
		Long: `Run every policy that has a schedule (cron syntax or @daily, @every 4h, ...)
until stopped with SIGTERM or Ctrl-C. On start, leftovers of an earlier
coffer that died mid-backup (hypervisor snapshots, bitmaps, exports,
overlays) are found through the state directory's journals and removed.
A policy whose previous run still goes when its time comes is skipped,
and the skip is recorded. Jobs, tasks and events go to the catalog
(` + "`coffer jobs`" + `); logs are structured (--log-format json for collectors).

Stopping the server cancels running jobs cleanly: VMs in flight release
their snapshots, queued VMs are not started.

The REST API, web UI and metrics endpoint are the server's next step; the
engine is a library this command drives, so they plug in here.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runServer(cmd.Context()) },
	}
}

func (a *app) runServer(ctx context.Context) error {
	cfg, warnings, err := a.policyConfig()
	if err != nil {
		return err
	}
	var scheduled []policy.Policy
	var names []string
	for _, p := range cfg.Policies {
		if p.Schedule != "" {
			scheduled = append(scheduled, p)
			names = append(names, p.ConnectionNames()...)
			for _, f := range warnings[p.Name] {
				a.log.Warn(f.Message)
			}
		}
	}
	if len(scheduled) == 0 {
		return usagef("no policy has a schedule: nothing for the server to run")
	}
	cat, err := a.openCatalog(ctx)
	if err != nil {
		return err
	}
	defer cat.Close()
	conns, storage, err := a.openConnectors(ctx, cfg, names)
	if err != nil {
		return err
	}
	eng, err := a.newEngine(ctx, cfg, cat, conns, storage)
	if err != nil {
		return err
	}
	defer eng.Close()
	a.log.Info("coffer server started", "policies", len(scheduled))
	s := &engine.Scheduler{Engine: eng, Policies: scheduled, Started: func(j *engine.Job) {
		a.log.Info("job started", "job", j.ID(), "policy", j.Policy().Name)
		go func() {
			res, err := j.Wait()
			switch {
			case err != nil:
				a.log.Error("job failed", "job", j.ID(), "policy", j.Policy().Name, "err", err)
			default:
				a.log.Info("job finished", "job", j.ID(), "policy", j.Policy().Name, "status", res.Job.Status,
					"tasks", len(res.Tasks), "failed", len(res.Failed()))
			}
		}()
	}}
	err = s.Run(ctx)
	if errors.Is(err, context.Canceled) {
		a.log.Info("coffer server stopped")
		return nil
	}
	return err
}
