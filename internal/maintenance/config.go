// Package maintenance runs a repository's upkeep on schedules: garbage
// collection, verify (reading a rotating share of the packs so that all
// of them are read once per period), forget (keep rules for the whole
// repository or each policy's retention), and copies to a second
// repository, each within its maintenance window. It also holds the
// settings of the server's periodic checks (statistics, RPO, locks) and
// of several servers sharing a catalog.
//
//	maintenance:
//	  task-history: 90d          # finished tasks kept in the catalog
//	  stats-every: 15m           # repository sizes refreshed (metrics, repository-full)
//	  health-every: 5m           # RPO and lock checks
//	  repository-full: 90        # percent of capacity that warns
//	  capacity: {offsite: 10TiB} # for repositories whose store has no capacity (S3)
//	  lock-warning: 7d           # warn when a kept point's lock ends this soon
//	  takeover-after: 30s        # several servers: a dead one's schedules move after this
//	  worker-dead-after: 30s     # the fleet: a worker silent this long is declared lost
//	  windows:
//	    - {name: night, start: "22:00", end: "06:00", days: [mon, tue, wed, thu, fri], timezone: Europe/Berlin}
//	  repositories:
//	    - repository: main       # a repositories entry, or "default" (--repo)
//	      window: night          # the default window of its jobs
//	      gc:     {schedule: "0 2 * * *", timezone: Europe/Berlin, missed: run-once}
//	      verify: {schedule: "0 3 * * *", read-data-period: 7d}
//	      forget: {schedule: "0 1 * * *", keep: {keep-daily: 14}}   # or policies: [nightly]
//	      copy:   [{to: offsite, schedule: "0 4 * * *", immutable-for: 30d},
//	               {to: replica, after: nightly}]           # each run's points, once it ends
//	      media-copy:                                         # to a media pool, in GFS media sets
//	        - {library: tapes, pool: offsite, schedule: "0 5 * * *", media-sets: {daily: 6, weekly: 4, monthly: 12}}
//	      catalog-export: {schedule: "30 0 * * *", keep: 14}  # the server's state into it (history: true adds the jobs')
//
// Every job's schedule takes timezone: (default: the server's zone; a
// run in a skipped hour runs once at the jump, a repeated hour runs
// once: internal/schedule) and missed: (run-once, the default: a run
// the schedule named while every server was down runs once when a
// server starts, as soon as its window allows; skip: it is left).
package maintenance

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/retention"
	"github.com/coffer-backup/coffer/internal/schedule"
)

// Config is the maintenance: section.
type Config struct {
	TaskHistory policy.Duration `yaml:"task-history"`
	StatsEvery  policy.Duration `yaml:"stats-every"`
	HealthEvery policy.Duration `yaml:"health-every"`
	// InventoryEvery is how often the server lists each connection's
	// VMs into the catalog's inventory (the VM view reads it).
	InventoryEvery policy.Duration `yaml:"inventory-every"`
	RepositoryFull float64         `yaml:"repository-full"`
	Capacity       map[string]Size `yaml:"capacity"`
	LockWarning    policy.Duration `yaml:"lock-warning"`
	TakeoverAfter  policy.Duration `yaml:"takeover-after"`
	// WorkerDeadAfter is how long a worker of the fleet may go without
	// a heartbeat before the leader declares it lost (internal/fleet).
	WorkerDeadAfter policy.Duration `yaml:"worker-dead-after"`
	Windows         []Window        `yaml:"windows"`
	Repositories    []Repository    `yaml:"repositories"`
}

// Defaults of the section's settings.
const (
	DefaultTaskHistory     = 90 * 24 * time.Hour
	DefaultStatsEvery      = 15 * time.Minute
	DefaultHealthEvery     = 5 * time.Minute
	DefaultInventoryEvery  = 5 * time.Minute
	DefaultRepositoryFull  = 90.0
	DefaultLockWarning     = 7 * 24 * time.Hour
	DefaultTakeoverAfter   = 30 * time.Second
	DefaultWorkerDeadAfter = 30 * time.Second
)

// WithDefaults fills the unset settings.
func (c Config) WithDefaults() Config {
	def := func(d *policy.Duration, v time.Duration) {
		if *d == 0 {
			*d = policy.Duration(v)
		}
	}
	def(&c.TaskHistory, DefaultTaskHistory)
	def(&c.StatsEvery, DefaultStatsEvery)
	def(&c.HealthEvery, DefaultHealthEvery)
	def(&c.InventoryEvery, DefaultInventoryEvery)
	def(&c.LockWarning, DefaultLockWarning)
	def(&c.TakeoverAfter, DefaultTakeoverAfter)
	def(&c.WorkerDeadAfter, DefaultWorkerDeadAfter)
	if c.RepositoryFull == 0 {
		c.RepositoryFull = DefaultRepositoryFull
	}
	return c
}

// Size is a byte count written like 10TiB or 500GB.
type Size int64

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Size) UnmarshalText(b []byte) error {
	n, err := config.ParseSize(string(b))
	if err != nil || n <= 0 {
		return fmt.Errorf("%q is not a size (like 10TiB)", b)
	}
	*s = Size(n)
	return nil
}

// Repository is the upkeep of one repository.
type Repository struct {
	// Repository names a repositories entry, or "default" for the
	// repository of --repo.
	Repository string `yaml:"repository"`
	// Window is the default window of its jobs ("": always).
	Window string     `yaml:"window"`
	GC     *GCJob     `yaml:"gc"`
	Verify *VerifyJob `yaml:"verify"`
	Forget *ForgetJob `yaml:"forget"`
	Copy   []CopyJob  `yaml:"copy"`
	// MediaCopy copies points to media pools of the configuration's
	// media libraries (mediasets.go).
	MediaCopy []MediaCopyJob `yaml:"media-copy"`
	// CatalogExport exports the server's state into the repository
	// (internal/catalog/catalogexport), so that a lost server comes back.
	CatalogExport *CatalogExportJob `yaml:"catalog-export"`
}

// Common are the settings every job has.
type Common struct {
	Schedule string `yaml:"schedule"`
	// Timezone is the zone of Schedule's times (an IANA name like
	// Europe/Berlin; "": the server's), with internal/schedule's rule for
	// daylight saving changes.
	Timezone string `yaml:"timezone"`
	// Window overrides the repository's window; "always" has none.
	Window string `yaml:"window"`
	// Missed is what a run the schedule named while every server was
	// down becomes when a server starts: MissedRunOnce (the default)
	// runs it once, as soon as its window allows; MissedSkip leaves it.
	Missed string `yaml:"missed"`
}

// What a run missed while every server was down becomes.
const (
	MissedRunOnce = "run-once"
	MissedSkip    = "skip"
)

// GCJob deletes what no point needs.
type GCJob struct {
	Common `yaml:",inline"`
}

// VerifyJob checks the repository; with ReadDataPeriod each run reads
// its share of the packs, so that every pack is read once per period.
type VerifyJob struct {
	Common         `yaml:",inline"`
	ReadDataPeriod policy.Duration `yaml:"read-data-period"`
}

// ForgetJob removes the points no keep rule selects: Keep for every
// source of the repository, or each of Policies' retention for its points.
type ForgetJob struct {
	Common   `yaml:",inline"`
	Keep     retention.Policy `yaml:"keep"`
	Policies []string         `yaml:"policies"`
}

// CopyJob copies new points to another repository of the configuration:
// on its schedule, or, with After, the points of each run of that
// policy, as soon as the run ends (copies.go).
type CopyJob struct {
	Common       `yaml:",inline"`
	To           string          `yaml:"to"`
	ImmutableFor policy.Duration `yaml:"immutable-for"`
	After        string          `yaml:"after"`
}

// CatalogExportJob exports the server's catalog state into the
// repository: with History the jobs' history too; then all but the Keep
// newest exports are deleted (0: none).
type CatalogExportJob struct {
	Common  `yaml:",inline"`
	History bool `yaml:"history"`
	Keep    int  `yaml:"keep"`
}

// Decode reads the section strictly (an unknown key is an error naming
// its line and the closest known key).
func Decode(f *config.File) (*Config, error) {
	c := &Config{}
	if err := f.Decode("maintenance", c); err != nil {
		return nil, err
	}
	return c, nil
}

// Job is one scheduled maintenance job, resolved from the section.
type Job struct {
	// Name is unique: REPOSITORY/KIND, REPOSITORY/copy:TARGET (with
	// after: REPOSITORY/copy:TARGET/after:POLICY), or
	// REPOSITORY/media-copy:LIBRARY/POOL (/after:POLICY).
	Name       string
	Kind       string // gc, verify, forget, copy, replicate, ...
	Repository string
	Schedule   cron.Schedule
	Spec       string // the schedule as written
	Zone       string // the schedule's timezone as written ("": the server's)
	// Missed is MissedRunOnce or MissedSkip (see Common.Missed).
	Missed string
	Window *Window
	// verify
	ReadDataPeriod time.Duration
	// forget
	Keep     retention.Policy
	Policies []string
	// copy
	To           string
	ImmutableFor time.Duration
	// After, for a copy or media-copy, is the policy each of whose runs
	// the job follows, copying the points the run made; such a job has
	// no Schedule and no Window.
	After string
	// media-copy: the library and pool, and the pool's GFS media sets
	Library   string
	Pool      string
	MediaSets MediaSets
	Retention time.Duration
	// verify-boot: the policy whose points it boots, and how
	Policy string
	Boot   policy.VerifyBoot
	// catalog-export: the history too, and the exports kept
	History     bool
	KeepExports int
	// replicate: the replication run
	Replication string
}

// Jobs resolves and checks the section against the rest of the
// configuration (repositories and policies by name), reporting every
// problem at once, each naming where it is.
func (c *Config) Jobs(engine *policy.Config) ([]Job, error) {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf("maintenance: "+format, a...)) }
	windows := map[string]*Window{}
	for i := range c.Windows {
		w := &c.Windows[i]
		switch {
		case w.Name == "":
			add("window #%d: name is missing", i+1)
		case w.Name == "always":
			add("window always: the name means no window; choose another")
		case windows[w.Name] != nil:
			add("window %s is defined twice", w.Name)
		}
		if err := w.check(); err != nil {
			add("window %s: %v", w.Name, err)
		}
		windows[w.Name] = w
	}
	if c.RepositoryFull < 0 || c.RepositoryFull > 100 {
		add("repository-full %g: a percentage, 1 to 100", c.RepositoryFull)
	}
	if c.TakeoverAfter != 0 && time.Duration(c.TakeoverAfter) < 3*time.Second {
		add("takeover-after %s: at least 3s (the lease is renewed every third of it)", c.TakeoverAfter)
	}
	for _, d := range []struct {
		key string
		v   policy.Duration
	}{{"stats-every", c.StatsEvery}, {"health-every", c.HealthEvery}, {"inventory-every", c.InventoryEvery},
		{"worker-dead-after", c.WorkerDeadAfter}} {
		if d.v != 0 && time.Duration(d.v) < time.Second {
			add("%s %s: at least 1s", d.key, d.v)
		}
	}
	repoKnown := func(name string) bool {
		_, ok := engine.Repository(name)
		return ok || name == "default"
	}
	for name := range c.Capacity {
		if !repoKnown(name) {
			add("capacity: unknown repository %q%s", name, knownRepos(engine))
		}
	}
	var jobs []Job
	seen := map[string]bool{}
	for i, r := range c.Repositories {
		where := fmt.Sprintf("repositories[%d]", i)
		switch {
		case r.Repository == "":
			add("%s: repository is missing (a repositories entry, or default)", where)
			continue
		case !repoKnown(r.Repository):
			add("%s: unknown repository %q%s", where, r.Repository, knownRepos(engine))
		case seen[r.Repository]:
			add("repository %s appears twice: give all its jobs in one entry", r.Repository)
		}
		seen[r.Repository] = true
		where = "repository " + r.Repository
		window := func(kind string, cm Common) *Window {
			name := cm.Window
			if name == "" {
				name = r.Window
			}
			if name == "" || name == "always" {
				return nil
			}
			w := windows[name]
			if w == nil {
				add("%s: %s: unknown window %q%s", where, kind, name, knownWindows(c.Windows))
			}
			return w
		}
		job := func(kind, name string, cm Common) (Job, bool) {
			j := Job{Name: r.Repository + "/" + name, Kind: kind, Repository: r.Repository, Spec: cm.Schedule, Zone: cm.Timezone,
				Missed: cm.Missed, Window: window(name, cm)}
			switch cm.Missed {
			case "":
				j.Missed = MissedRunOnce
			case MissedRunOnce, MissedSkip:
			default:
				add("%s: %s: missed %q: run-once (a run missed while every server was down runs once at start) or skip", where, name, cm.Missed)
				return j, false
			}
			if _, err := schedule.Zone(cm.Timezone); err != nil {
				add("%s: %s: %v", where, name, err)
				return j, false
			}
			if cm.Schedule == "" {
				add("%s: %s: schedule is missing (cron like \"0 3 * * *\", or @daily)", where, name)
				return j, false
			}
			sc, err := schedule.Parse(cm.Schedule, cm.Timezone)
			if err != nil {
				add("%s: %s: schedule %q: %v (want 5 cron fields like \"0 3 * * *\", or @daily, @every 6h)", where, name, cm.Schedule, err)
				return j, false
			}
			j.Schedule = sc
			return j, true
		}
		if r.GC != nil {
			if j, ok := job("gc", "gc", r.GC.Common); ok {
				jobs = append(jobs, j)
			}
		}
		if v := r.Verify; v != nil {
			j, ok := job("verify", "verify", v.Common)
			j.ReadDataPeriod = time.Duration(v.ReadDataPeriod)
			if ok && j.ReadDataPeriod > 0 {
				if n := RunsPerPeriod(j.Schedule, j.ReadDataPeriod, time.Unix(0, 0)); n == 0 {
					add("%s: verify: no run falls within read-data-period %s: make the period longer than the time between runs", where, v.ReadDataPeriod)
					ok = false
				} else if n > maxShares {
					add("%s: verify: %d runs within read-data-period %s, at most %d: make the period shorter or run less often", where, n, v.ReadDataPeriod, maxShares)
					ok = false
				} else if skipped := outsideWindow(j, time.Now()); skipped > 0 {
					add("%s: verify: its window keeps %d of the %d runs of each read-data-period from starting, and their shares of the packs would never be read: schedule the verify inside its window", where, skipped, n)
					ok = false
				}
			}
			if ok {
				jobs = append(jobs, j)
			}
		}
		if f := r.Forget; f != nil {
			j, ok := job("forget", "forget", f.Common)
			j.Keep, j.Policies = f.Keep, f.Policies
			switch {
			case f.Keep.Empty() && len(f.Policies) == 0:
				add("%s: forget: give keep rules (keep: {keep-daily: 14}) or the policies whose retention applies (policies: [nightly])", where)
				ok = false
			case !f.Keep.Empty() && len(f.Policies) > 0:
				add("%s: forget: keep and policies exclude each other (keep applies to every point of the repository)", where)
				ok = false
			}
			for _, pn := range f.Policies {
				p, found := engine.Policy(pn)
				switch {
				case !found:
					add("%s: forget: unknown policy %q", where, pn)
					ok = false
				case p.Retention.Empty():
					add("%s: forget: policy %s has no retention to apply", where, pn)
					ok = false
				case repoOf(p) != r.Repository:
					add("%s: forget: policy %s writes to repository %s, not %s", where, pn, repoOf(p), r.Repository)
					ok = false
				}
			}
			if ok {
				jobs = append(jobs, j)
			}
		}
		if x := r.CatalogExport; x != nil {
			j, ok := job("catalog-export", "catalog-export", x.Common)
			j.History, j.KeepExports = x.History, x.Keep
			if x.Keep < 0 {
				add("%s: catalog-export: keep %d: the number of exports kept (0: all)", where, x.Keep)
				ok = false
			}
			if ok {
				jobs = append(jobs, j)
			}
		}
		jobs = append(jobs, copyJobs(r, where, engine, job, add, repoKnown)...)
	}
	boots, bootErrs := bootJobs(engine)
	jobs = append(jobs, replicationJobs(engine)...)
	return append(jobs, boots...), errors.Join(append(errs, bootErrs...)...)
}

// maxShares bounds the runs of a verify rotation within its period.
const maxShares = 1000

// repoOf is the repository a policy writes to, as the section names it.
func repoOf(p policy.Policy) string {
	if p.Repository == "" {
		return "default"
	}
	return p.Repository
}

func knownRepos(c *policy.Config) string {
	names := []string{"default"}
	for _, r := range c.Repositories {
		names = append(names, r.Name)
	}
	return " (known: " + strings.Join(names, ", ") + ")"
}

func knownWindows(ws []Window) string {
	if len(ws) == 0 {
		return " (no window is defined)"
	}
	var names []string
	for _, w := range ws {
		names = append(names, w.Name)
	}
	return " (known: " + strings.Join(names, ", ") + ")"
}

// outsideWindow counts the runs of a job within the read-data-period
// holding t that its window keeps from starting.
func outsideWindow(j Job, t time.Time) int {
	if j.Window == nil {
		return 0
	}
	start := periodStart(j.ReadDataPeriod, t)
	n := 0
	for at := j.Schedule.Next(start.Add(-time.Nanosecond)); !at.IsZero() && at.Before(start.Add(j.ReadDataPeriod)); at = j.Schedule.Next(at) {
		if open, _ := j.Window.Open(at); !open {
			n++
		}
	}
	return n
}
