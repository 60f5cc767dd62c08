package policy

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/schedule"
)

// Validate checks every section and returns all problems at once, each
// naming where it is.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	conns := names(len(c.Connections), func(i int) string { return c.Connections[i].Name }, "connection", add)
	repos := names(len(c.Repositories), func(i int) string { return c.Repositories[i].Name }, "repository", add)
	names(len(c.ResourceGroups), func(i int) string { return c.ResourceGroups[i].Name }, "resource group", add)
	names(len(c.Policies), func(i int) string { return c.Policies[i].Name }, "policy", add)
	names(len(c.MediaLibraries), func(i int) string { return c.MediaLibraries[i].Name }, "media library", add)
	for _, l := range c.MediaLibraries {
		l.validate(add)
	}
	names(len(c.Replications), func(i int) string { return c.Replications[i].Name }, "replication", add)
	for _, r := range c.Replications {
		r.validate(c, add)
	}
	names(len(c.FailoverPlans), func(i int) string { return c.FailoverPlans[i].Name }, "failover plan", add)
	for _, p := range c.FailoverPlans {
		p.validate(c, add)
	}
	for _, cn := range c.Connections {
		if cn.Kind == "" {
			add("connection %s: kind is missing (qemu, vsphere, fake, ...)", cn.Name)
		}
	}
	for _, r := range c.Repositories {
		if r.Name == "default" {
			// "default" names the repository of the repository setting
			// (--repo) everywhere: in maintenance, the API's
			// /repositories/default and access paths.
			add("repository default: the name means the repository of the repository setting (--repo); choose another")
		}
		if r.Location == "" {
			add("repository %s: location is missing", r.Name)
		}
		if r.Streams < 0 {
			add("repository %s: streams must not be negative", r.Name)
		}
	}
	l := c.Limits
	for _, n := range []struct {
		key string
		v   int64
	}{{"tasks", int64(l.Tasks)}, {"per-host", int64(l.PerHost)}, {"per-datastore", int64(l.PerDatastore)},
		{"per-repository", int64(l.PerRepository)}, {"rate", int64(l.Rate)}, {"task-rate", int64(l.TaskRate)},
		{"boot-verifications", int64(l.BootVerifications)}} {
		if n.v < 0 {
			add("limits.%s must not be negative", n.key)
		}
	}
	for _, g := range c.ResourceGroups {
		if g.Limit <= 0 {
			add("resource group %s: limit must be at least 1", g.Name)
		}
		if len(g.Datastores)+len(g.Hosts) == 0 {
			add("resource group %s: name at least one datastore or host", g.Name)
		}
		checkGlobs("resource group "+g.Name+": datastores", g.Datastores, add)
		checkGlobs("resource group "+g.Name+": hosts", g.Hosts, add)
	}
	for _, p := range c.Policies {
		p.validate(conns, repos, add)
	}
	c.StorageSnapshots.validate(conns, add)
	c.LatencyControl.validate(add)
	return errors.Join(errs...)
}

func (p Policy) validate(conns, repos map[string]bool, add func(string, ...any)) {
	where := "policy " + p.Name
	cs := p.ConnectionNames()
	if len(cs) == 0 {
		add("%s: no connection given (connection: NAME)", where)
	}
	for _, c := range cs {
		if !conns[c] {
			add("%s: unknown connection %q%s", where, c, known(conns))
		}
	}
	if p.Repository != "" && !repos[p.Repository] {
		add("%s: unknown repository %q%s", where, p.Repository, known(repos))
	}
	p.Select.validate(where+": select", add)
	p.Exclude.validate(where+": exclude", add)
	oneOf(where+": mode", p.Mode, add, "", "incremental", "differential", "full")
	oneOf(where+": snapshot", p.Snapshot, add, "", string(hypervisor.CrashConsistent), string(hypervisor.Quiesced),
		string(hypervisor.WithMemory), string(hypervisor.Suspend), string(hypervisor.AsIs))
	oneOf(where+": quiesce", p.Quiesce, add, "", string(hypervisor.QuiesceFallback), string(hypervisor.QuiesceRequired))
	oneOf(where+": group", p.Group, add, "", "vm", "datastore")
	oneOf(where+": storage-fallback", p.StorageFallback, add, "", "fail", "vm")
	if p.StorageFallback != "" && p.Group != "datastore" {
		add("%s: storage-fallback only applies with group: datastore", where)
	}
	switch {
	case p.KeepStorageSnapshots < 0 || p.KeepStorageSnapshots > MaxKeptStorageSnapshots:
		add("%s: keep-storage-snapshots must be from 0 to %d (each kept snapshot holds every block production has overwritten since)", where, MaxKeptStorageSnapshots)
	case p.KeepStorageSnapshots > 0 && p.Group != "datastore":
		add("%s: keep-storage-snapshots only applies with group: datastore (VM-by-VM runs take no storage snapshot)", where)
	}
	if p.Quiesce == string(hypervisor.QuiesceRequired) && p.Snapshot != string(hypervisor.Quiesced) {
		add("%s: quiesce: required only applies with snapshot: quiesced", where)
	}
	if p.FullEvery < 0 {
		add("%s: full-every must not be negative", where)
	}
	if p.Mode == "full" && (p.FullEvery > 0 || len(p.FullOn) > 0) {
		add("%s: full-every and full-on make no sense with mode: full", where)
	}
	for _, d := range p.FullOn {
		if _, ok := weekdays[strings.ToLower(d)]; !ok {
			add("%s: full-on: %q is not a weekday (sunday, monday, ... or sun, mon, ...)", where, d)
		}
	}
	if _, err := schedule.Zone(p.Timezone); err != nil {
		add("%s: %v", where, err)
	} else if p.Schedule != "" {
		sc, err := p.ParseSchedule()
		if err != nil {
			add("%s: schedule %q: %v (want 5 cron fields like \"0 22 * * *\", or @daily, @every 6h)", where, p.Schedule, err)
		} else if gap := LongestGap(sc); p.RPO > 0 && time.Duration(p.RPO) < gap {
			add("%s: rpo %s is shorter than the longest time between two scheduled runs (%s): every VM would miss it; make it longer than %s",
				where, p.RPO, Duration(gap), Duration(gap))
		}
	}
	if p.RPO > 0 && time.Duration(p.RPO) < time.Minute {
		add("%s: rpo %s is less than a minute: write how old a VM's newest backup may be, like 26h or 2d", where, p.RPO)
	}
	t := p.Timeouts
	for _, d := range []struct {
		key string
		neg bool
	}{{"vm", t.VM < 0}, {"inventory", t.Inventory < 0}, {"snapshot-create", t.SnapshotCreate < 0},
		{"snapshot-remove", t.SnapshotRemove < 0}, {"quiesce", t.Quiesce < 0}, {"setup", t.Setup < 0}} {
		if d.neg {
			add("%s: timeouts.%s must not be negative", where, d.key)
		}
	}
	if p.Retries.Attempts < 0 || p.Retries.Backoff < 0 || p.Retries.MaxBackoff < 0 {
		add("%s: retries must not be negative", where)
	}
	if p.Tasks < 0 {
		add("%s: tasks must not be negative", where)
	}
	for i, w := range p.Workers {
		if w == "" || slices.Contains(p.Workers[:i], w) {
			add("%s: workers: %q: name each worker once (the names coffer worker --name gave them)", where, w)
		}
	}
	if p.ChangeCheck < -1 {
		add("%s: change-check %d: the spans of each disk an incremental reads to check change tracking (-1: off)", where, p.ChangeCheck)
	}
	if v, ok := p.Tags["policy"]; ok {
		// The engine tags every point policy=<name> and retention selects
		// by it: another value would hide the points from this policy's
		// retention and hand them to the other policy's.
		add("%s: tags: policy (%q) is set by coffer to the policy's name, which retention selects by: use another tag name", where, v)
	}
	if p.Retention.Within < 0 {
		add("%s: retention.keep-within must not be negative", where)
	}
	p.validateHooks(where, add)
}

func (s Selector) validate(where string, add func(string, ...any)) {
	checkGlobs(where+".names", s.Names, add)
	checkGlobs(where+".hosts", s.Hosts, add)
	checkGlobs(where+".datastores", s.Datastores, add)
	for k, v := range s.Tags {
		if k == "" {
			add("%s.tags: empty tag name", where)
		}
		checkGlobs(where+".tags."+k, []string{v}, add)
	}
}

func checkGlobs(where string, globs []string, add func(string, ...any)) {
	for _, g := range globs {
		if g == "" {
			add("%s: empty pattern", where)
			continue
		}
		if _, err := path.Match(g, ""); err != nil {
			add("%s: bad pattern %q: %v", where, g, err)
		}
	}
}

func oneOf(where, v string, add func(string, ...any), allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	add("%s: %q is not one of %s", where, v, strings.Join(allowed[1:], ", "))
}

// names checks that entries have unique, non-empty names and returns them.
func names(n int, name func(int) string, what string, add func(string, ...any)) map[string]bool {
	seen := map[string]bool{}
	for i := range n {
		s := name(i)
		switch {
		case s == "":
			add("%s #%d: name is missing", what, i+1)
		case seen[s]:
			add("%s %s is defined twice", what, s)
		}
		seen[s] = true
	}
	return seen
}

func known(set map[string]bool) string {
	var list []string
	for k := range set {
		if k != "" {
			list = append(list, k)
		}
	}
	if len(list) == 0 {
		return " (none is configured)"
	}
	return fmt.Sprintf(" (known: %s)", strings.Join(sorted(list), ", "))
}

// LongestGap is the longest time between two consecutive runs of a
// schedule over the four weeks after a fixed Monday (cron schedules
// repeat weekly, apart from month days, which four weeks mostly show).
func LongestGap(sc cron.Schedule) time.Duration {
	t := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	end := t.Add(28 * 24 * time.Hour)
	var longest time.Duration
	prev := sc.Next(t)
	for i := 0; i < 100000 && !prev.IsZero() && prev.Before(end); i++ {
		next := sc.Next(prev)
		if next.IsZero() {
			break
		}
		longest = max(longest, next.Sub(prev))
		prev = next
	}
	return longest
}
