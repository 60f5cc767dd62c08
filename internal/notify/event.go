// Package notify tells people what coffer did: it routes events (a task
// failed, an RPO was missed, verify found damage, a repository is nearly
// full, an immutable lock is about to lapse) through matchers to targets
// (SMTP, webhook) and delivers them asynchronously, retrying with capped
// exponential backoff, with every delivery recorded in the catalog.
//
// The model is Proxmox Backup Server's: events carry a type, a severity
// and labels; matchers select events by them and name targets; a target no
// matcher names receives every failure (everything but successes), so a
// fresh configuration with one mail target mails failures only.
//
// The rest of coffer builds events with the constructors (TaskFinished,
// RPOMissed, VerifyDamage, RepositoryNearlyFull, LockLapsing) and hands
// them to an Emitter. docs/notifications.md documents the events, the
// webhook body and the configuration section.
package notify

import (
	"context"
	"time"
)

// Type names what happened.
type Type string

const (
	TypeTaskFailed     Type = "task-failed"     // a task or job failed, partly failed or was cancelled
	TypeTaskSucceeded  Type = "task-succeeded"  // a task or job succeeded (not routed by default)
	TypeRPOMissed      Type = "rpo-missed"      // a VM has no good point within its policy's RPO
	TypeVerifyDamage   Type = "verify-damage"   // verify found damage (data lost or metadata only)
	TypeRepositoryFull Type = "repository-full" // a repository's usage passed its threshold
	TypeLockLapsing    Type = "lock-lapsing"    // a point's object lock ends soon while retention keeps it
	TypeTest           Type = "test"            // a test notification (SendTest); never routed
)

// Types lists the types matchers may name, in documentation order.
var Types = []Type{TypeTaskFailed, TypeTaskSucceeded, TypeRPOMissed, TypeVerifyDamage, TypeRepositoryFull,
	TypeLockLapsing, TypeTest}

// Severity is how urgent an event is, PBS's four levels.
type Severity string

const (
	Info    Severity = "info"
	Notice  Severity = "notice"
	Warning Severity = "warning"
	Error   Severity = "error"
)

// Severities lists the severities from the least to the most urgent.
var Severities = []Severity{Info, Notice, Warning, Error}

// Label names the rest of coffer sets; matchers may select on any label.
const (
	LabelPolicy     = "policy"
	LabelConnection = "connection"
	LabelVM         = "vm"
	LabelRepository = "repository"
	LabelTask       = "task" // the task kind of task events
)

// Event is one thing that happened, as it is recorded, mailed and posted
// (the webhook body is this JSON with a version and the delivery ID; see
// docs/notifications.md). Exactly one of the detail fields is set, the one
// of its type (none for test events).
type Event struct {
	// ID is the catalog's, set when the event is emitted (0 for tests).
	ID       int64     `json:"id"`
	Type     Type      `json:"type"`
	Severity Severity  `json:"severity"`
	Time     time.Time `json:"time"`
	// Object is the path of what the event is about, as in access control:
	// /policies/{policy}, /connections/{connection}/vm/{vm},
	// /repositories/{repository}.
	Object string `json:"object"`
	Title  string `json:"title"` // one line
	Body   string `json:"body"`  // the details as text, several lines
	// Labels are policy, connection, vm, repository and task (the task
	// kind), those that apply.
	Labels map[string]string `json:"labels"`

	Task   *TaskDetails   `json:"task,omitempty"`
	RPO    *RPODetails    `json:"rpo,omitempty"`
	Damage *DamageDetails `json:"damage,omitempty"`
	Usage  *UsageDetails  `json:"usage,omitempty"`
	Lock   *LockDetails   `json:"lock,omitempty"`
}

// Emitter is what the rest of coffer calls: it returns once the event and
// its deliveries are recorded (or nothing matched), and delivery goes on
// in the background.
type Emitter interface {
	Emit(ctx context.Context, ev Event) error
}

// Discard is the Emitter of a coffer without notifications.
var Discard Emitter = discard{}

type discard struct{}

func (discard) Emit(context.Context, Event) error { return nil }

// Subject is what an event is about; its fields become labels and the
// event's object path.
type Subject struct {
	Policy     string
	Connection string
	VM         string // the VM's name
	Repository string
}

func (s Subject) labels() map[string]string {
	l := map[string]string{}
	for k, v := range map[string]string{LabelPolicy: s.Policy, LabelConnection: s.Connection, LabelVM: s.VM,
		LabelRepository: s.Repository} {
		if v != "" {
			l[k] = v
		}
	}
	return l
}

// object is the most specific path of the subject: the VM, else the
// policy, else the repository.
func (s Subject) object() string {
	switch {
	case s.VM != "" && s.Connection != "":
		return "/connections/" + s.Connection + "/vm/" + s.VM
	case s.Policy != "":
		return "/policies/" + s.Policy
	case s.Repository != "":
		return "/repositories/" + s.Repository
	}
	return "/"
}

func newEvent(t Type, sev Severity, s Subject, title string, tm time.Time) Event {
	return Event{Type: t, Severity: sev, Time: tm, Object: s.object(), Title: title, Labels: s.labels()}
}
