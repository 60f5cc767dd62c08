package maintenance

import (
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/schedule"
)

// replicationJobs are the replications' schedules as maintenance jobs:
// the scheduler that claims each run once among several servers runs
// them, and the run goes, as run-replication does, to the worker of the
// replication's DR host. A schedule that does not parse is reported by
// the replications section's own check, and has no job.
func replicationJobs(engine *policy.Config) []Job {
	var jobs []Job
	for _, r := range engine.Replications {
		if r.Schedule == "" {
			continue
		}
		sc, err := schedule.Parse(r.Schedule, r.Timezone)
		if err != nil {
			continue
		}
		repo := r.Repository
		if repo == "" {
			repo = "default"
		}
		jobs = append(jobs, Job{Name: repo + "/replicate:" + r.Name, Kind: "replicate", Repository: repo, Schedule: sc,
			Spec: r.Schedule, Zone: r.Timezone, Missed: MissedRunOnce, Replication: r.Name})
	}
	return jobs
}
