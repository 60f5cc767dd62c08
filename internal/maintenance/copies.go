package maintenance

import (
	"time"

	"github.com/coffer-backup/coffer/internal/policy"
)

// A copy runs on its schedule, or after each run of a policy (after:
// POLICY): Veeam's immediate copy, Bareos's run-after job. Such a copy
// copies the points that run made, as soon as it ends, whatever the
// repository's window (a window only delays what can wait; a copy after
// a backup is the backup's own protection). It has no schedule, so
// timezone, window and missed do not apply to it and are refused.

// jobMaker resolves a scheduled job's common settings (Jobs' job).
type jobMaker func(kind, name string, cm Common) (Job, bool)

// copyJobs resolves a repository's copy and media-copy jobs.
func copyJobs(r Repository, where string, engine *policy.Config, job jobMaker, add func(string, ...any), repoKnown func(string) bool) []Job {
	var jobs []Job
	targets := map[string]bool{}
	for _, cp := range r.Copy {
		name := "copy:" + cp.To
		key := cp.To
		if cp.After != "" {
			name += "/after:" + cp.After
			key += " after " + cp.After
		}
		j, ok := scheduleOrAfter(r, where, name, "copy", cp.Common, cp.After, engine, job, add)
		j.To, j.ImmutableFor = cp.To, time.Duration(cp.ImmutableFor)
		switch {
		case cp.To == "":
			add("%s: copy: to is missing (a repositories entry)", where)
			ok = false
		case !repoKnown(cp.To) || cp.To == "default":
			add("%s: copy: unknown target repository %q%s", where, cp.To, knownRepos(engine))
			ok = false
		case cp.To == r.Repository:
			add("%s: copy: a repository cannot be copied into itself", where)
			ok = false
		case targets[key]:
			add("%s: copy to %s is given twice", where, key)
			ok = false
		}
		targets[key] = true
		if ok {
			jobs = append(jobs, j)
		}
	}
	return append(jobs, mediaCopyJobs(r, where, engine, job, add)...)
}

// scheduleOrAfter resolves a copy's timing: its schedule (job), or the
// policy it follows.
func scheduleOrAfter(r Repository, where, name, kind string, cm Common, after string, engine *policy.Config, job jobMaker,
	add func(string, ...any)) (Job, bool) {
	if after == "" {
		return job(kind, name, cm)
	}
	j := Job{Name: r.Repository + "/" + name, Kind: kind, Repository: r.Repository, After: after}
	ok := true
	if cm != (Common{}) {
		add("%s: %s: after %s starts it when each run of the policy ends: leave schedule, timezone, window and missed out", where, name, after)
		ok = false
	}
	switch p, found := engine.Policy(after); {
	case !found:
		add("%s: %s: after: unknown policy %q", where, name, after)
		ok = false
	case repoOf(p) != r.Repository:
		add("%s: %s: after: policy %s writes to repository %s, not %s: give the copy under repository %s", where, name, after, repoOf(p), r.Repository, repoOf(p))
		ok = false
	}
	return j, ok
}

// After lists the jobs that follow runs of the named policy.
func After(jobs []Job, policyName string) []Job {
	var out []Job
	for _, j := range jobs {
		if j.After == policyName {
			out = append(out, j)
		}
	}
	return out
}

// Scheduled lists the jobs that run on a schedule (not after a policy).
func Scheduled(jobs []Job) []Job {
	var out []Job
	for _, j := range jobs {
		if j.After == "" {
			out = append(out, j)
		}
	}
	return out
}
