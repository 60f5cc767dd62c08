package notify

import (
	"fmt"
	"strings"
	"time"
)

// TaskKind is the kind of task an event reports on.
type TaskKind string

const (
	KindBackupJob TaskKind = "backup-job" // one run of a policy
	KindVM        TaskKind = "vm"         // one VM within a backup job
	KindRestore   TaskKind = "restore"
	KindVerify    TaskKind = "verify"
	KindGC        TaskKind = "gc"
	KindCopy      TaskKind = "copy"
	// KindVerifyBoot is a boot verification of a backup point: its
	// failure means a point that does not boot.
	KindVerifyBoot TaskKind = "verify-boot"
)

// TaskDetails describe a finished task or job.
type TaskDetails struct {
	Kind TaskKind `json:"kind"`
	// ID is the job or task ID as `coffer jobs` shows it.
	ID         string    `json:"id"`
	Status     string    `json:"status"` // success, failed, partial, cancelled
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Error      string    `json:"error,omitempty"`
	Warnings   []string  `json:"warnings,omitempty"`
	// VMsTotal and FailedVMs describe backup jobs: how many VMs the job
	// had and the names of those that failed.
	VMsTotal  int      `json:"vms_total,omitempty"`
	FailedVMs []string `json:"failed_vms,omitempty"`
	// BytesStored is what the task added to the repository.
	BytesStored int64 `json:"bytes_stored,omitempty"`
}

// TaskFinished reports a finished task: task-succeeded when its status is
// success, else task-failed (error; warning for a partial or cancelled
// one).
func TaskFinished(s Subject, d TaskDetails) Event {
	t, sev := TypeTaskFailed, Error
	switch d.Status {
	case "success":
		t, sev = TypeTaskSucceeded, Info
	case "partial", "cancelled":
		sev = Warning
	}
	what := string(d.Kind)
	switch d.Kind {
	case KindBackupJob:
		what = "backup job of policy " + s.Policy
	case KindVM:
		what = "backup of " + s.VM
	case KindRestore:
		what = "restore of " + orDash(s.VM)
	case KindVerify, KindGC:
		what = string(d.Kind) + " of repository " + s.Repository
	case KindCopy:
		what = "copy to repository " + s.Repository
	case KindVerifyBoot:
		what = "boot verification of " + orDash(s.VM)
	}
	verb := map[string]string{"success": "succeeded", "failed": "failed", "partial": "partly failed",
		"cancelled": "was cancelled"}[d.Status]
	if verb == "" {
		verb = "ended " + d.Status
	}
	ev := newEvent(t, sev, s, upperFirst(what)+" "+verb, d.FinishedAt)
	ev.Labels[LabelTask] = string(d.Kind)
	var b body
	b.line("Task", fmt.Sprintf("%s %s", d.Kind, d.ID))
	b.line("Status", d.Status)
	b.line("Error", d.Error)
	if d.VMsTotal > 0 {
		b.line("VMs", fmt.Sprintf("%d, %d failed", d.VMsTotal, len(d.FailedVMs)))
	}
	b.line("Failed VMs", strings.Join(d.FailedVMs, ", "))
	b.time("Started", d.StartedAt)
	b.time("Finished", d.FinishedAt)
	if !d.StartedAt.IsZero() && !d.FinishedAt.IsZero() {
		b.line("Duration", d.FinishedAt.Sub(d.StartedAt).Round(time.Second).String())
	}
	if d.BytesStored > 0 {
		b.line("Stored", fmt.Sprintf("%d bytes", d.BytesStored))
	}
	for _, w := range d.Warnings {
		b.line("Warning", w)
	}
	ev.Body = b.String()
	ev.Task = &d
	return ev
}

// RPODetails describe a VM without a good point within its RPO.
type RPODetails struct {
	RPOSeconds int64 `json:"rpo_seconds"`
	// LastGoodPoint and LastGoodTime are the newest good point, empty
	// and zero when the VM has none.
	LastGoodPoint string    `json:"last_good_point,omitempty"`
	LastGoodTime  time.Time `json:"last_good_time,omitzero"`
}

// RPOMissed reports a VM (s.VM, of s.Policy) whose newest good point is
// older than rpo at now.
func RPOMissed(s Subject, rpo time.Duration, lastPoint string, lastTime, now time.Time) Event {
	ev := newEvent(TypeRPOMissed, Error, s, fmt.Sprintf("%s has no backup within its RPO of %s", s.VM, rpo), now)
	var b body
	b.line("VM", s.VM)
	b.line("Policy", s.Policy)
	b.line("RPO", rpo.String())
	if lastTime.IsZero() {
		b.line("Last good point", "none")
	} else {
		b.line("Last good point", fmt.Sprintf("%s at %s (%s ago)", lastPoint, lastTime.UTC().Format(time.RFC3339),
			now.Sub(lastTime).Round(time.Minute)))
	}
	ev.Body = b.String()
	ev.RPO = &RPODetails{RPOSeconds: int64(rpo / time.Second), LastGoodPoint: lastPoint, LastGoodTime: lastTime}
	return ev
}

// DamageDetails describe what a verify found.
type DamageDetails struct {
	// DataLost says whether backup points lost data (else only metadata
	// is damaged and a repair rebuilds it).
	DataLost bool `json:"data_lost"`
	// Points are the IDs of the points that lost data.
	Points []string `json:"points,omitempty"`
	// Findings is how many problems verify reported.
	Findings int    `json:"findings"`
	Summary  string `json:"summary,omitempty"`
	// Repair is what mends it, as verify advises.
	Repair string `json:"repair,omitempty"`
}

// VerifyDamage reports damage verify found in s.Repository: error when
// points lost data, warning when only metadata is damaged.
func VerifyDamage(s Subject, d DamageDetails, now time.Time) Event {
	sev, title := Warning, fmt.Sprintf("Verify found damaged metadata in repository %s (no data lost)", s.Repository)
	if d.DataLost {
		sev, title = Error, fmt.Sprintf("Verify found data lost in repository %s: %d point(s) affected",
			s.Repository, len(d.Points))
	}
	ev := newEvent(TypeVerifyDamage, sev, s, title, now)
	var b body
	b.line("Repository", s.Repository)
	b.line("Data lost", fmt.Sprint(d.DataLost))
	b.line("Findings", fmt.Sprint(d.Findings))
	b.line("Points", strings.Join(d.Points, ", "))
	b.line("Summary", d.Summary)
	b.line("Repair", d.Repair)
	ev.Body = b.String()
	ev.Damage = &d
	return ev
}

// UsageDetails describe a repository's usage.
type UsageDetails struct {
	UsedBytes     int64   `json:"used_bytes"`
	CapacityBytes int64   `json:"capacity_bytes"`
	UsedPercent   float64 `json:"used_percent"`
	// ThresholdPercent is the threshold that was passed.
	ThresholdPercent float64 `json:"threshold_percent"`
	// EstimatedFull is when the repository is expected to be full at the
	// recent rate of growth, zero when unknown.
	EstimatedFull time.Time `json:"estimated_full,omitzero"`
}

// RepositoryNearlyFull reports a repository whose usage passed
// thresholdPercent: warning, error once it is full.
func RepositoryNearlyFull(repository string, used, capacity int64, thresholdPercent float64, estimatedFull, now time.Time) Event {
	pct := 0.0
	if capacity > 0 {
		pct = float64(used) * 100 / float64(capacity)
	}
	sev := Warning
	if capacity > 0 && used >= capacity {
		sev = Error
	}
	s := Subject{Repository: repository}
	ev := newEvent(TypeRepositoryFull, sev, s, fmt.Sprintf("Repository %s is %.0f%% full", repository, pct), now)
	var b body
	b.line("Repository", repository)
	b.line("Used", fmt.Sprintf("%d of %d bytes (%.1f%%)", used, capacity, pct))
	b.line("Threshold", fmt.Sprintf("%.0f%%", thresholdPercent))
	b.time("Estimated full", estimatedFull)
	ev.Body = b.String()
	ev.Usage = &UsageDetails{UsedBytes: used, CapacityBytes: capacity, UsedPercent: pct,
		ThresholdPercent: thresholdPercent, EstimatedFull: estimatedFull}
	return ev
}

// LockDetails describe a point whose object lock ends soon.
type LockDetails struct {
	Point     string    `json:"point"`
	LockUntil time.Time `json:"lock_until"`
	// WithinDays is the warning horizon: the lock ends within it.
	WithinDays int `json:"within_days"`
}

// LockLapsing reports that point's object lock ends at until, within
// withinDays of now, while retention still keeps the point: from then on
// it can be deleted (extend the lock, e.g. with a longer immutable-for).
func LockLapsing(s Subject, point string, until time.Time, withinDays int, now time.Time) Event {
	left := until.Sub(now).Round(time.Hour)
	ev := newEvent(TypeLockLapsing, Warning, s, fmt.Sprintf("The lock of point %s of %s ends in %s", point, orDash(s.VM), left), now)
	var b body
	b.line("Point", point)
	b.line("VM", s.VM)
	b.line("Repository", s.Repository)
	b.time("Locked until", until)
	b.line("Note", "retention still keeps this point; once the lock ends it can be deleted or altered")
	ev.Body = b.String()
	ev.Lock = &LockDetails{Point: point, LockUntil: until, WithinDays: withinDays}
	return ev
}

// testEvent is what SendTest sends.
func testEvent(target string, now time.Time) Event {
	ev := newEvent(TypeTest, Info, Subject{}, "Test notification from coffer", now)
	ev.Object = "/notifications/targets/" + target
	ev.Body = "This is a test of notification target " + target + ". If you read it, the target works.\n"
	return ev
}

// body builds the "Key: value" lines of an event's text.
type body struct{ strings.Builder }

func (b *body) line(key, value string) {
	if value == "" {
		return
	}
	fmt.Fprintf(b, "%s: %s\n", key, value)
}

func (b *body) time(key string, t time.Time) {
	if !t.IsZero() {
		b.line(key, t.UTC().Format(time.RFC3339))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
