package catalog

import (
	"context"
	"errors"
	"time"
)

// Notifications are the records internal/notify keeps in the catalog: the
// events it routed to at least one target, and one delivery per event and
// target with its attempts, so that deliveries survive a restart and the
// console can show the ones that failed.
//
// A delivery is pending until it is delivered or given up (failed). A
// sender claims due pending deliveries (ClaimDeliveries), which moves
// their next attempt past a lease so that no other process sends them
// meanwhile; when the sender dies, the lease runs out and the delivery is
// due again. Delivery is therefore at least once.
type Notifications interface {
	// AddNotification records an event and a pending delivery, due now,
	// for each target, in one transaction; it sets ev.ID (and ev.Time to
	// now when zero) and returns the deliveries in target order.
	AddNotification(ctx context.Context, ev *NotificationEvent, targets []string) ([]Delivery, error)
	// ClaimDeliveries returns up to limit pending deliveries due at now
	// (oldest due first), each with its event, and makes them due again
	// only at now+lease.
	ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Delivery, error)
	// RecordDeliveryAttempt counts one attempt of a pending delivery and
	// stores its outcome. A delivery already finished (by another
	// process whose lease ran out) is left as it is; a missing one is
	// ErrNotFound.
	RecordDeliveryAttempt(ctx context.Context, a DeliveryAttempt) error
	// RetryDelivery makes a failed delivery pending again, due at at.
	// Deliveries that are not failed are refused with ErrNotFailed.
	RetryDelivery(ctx context.Context, id int64, at time.Time) error
	// NextDeliveryDue is the earliest next attempt of a pending delivery,
	// zero when none is pending.
	NextDeliveryDue(ctx context.Context) (time.Time, error)
	GetDelivery(ctx context.Context, id int64) (Delivery, error)
	ListDeliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, error) // newest first
	// PruneNotifications deletes events that occurred before before and
	// have no pending delivery, with their deliveries, and returns how
	// many events it deleted.
	PruneNotifications(ctx context.Context, before time.Time) (int, error)
}

// ErrNotFailed refuses to retry a delivery that is pending or delivered.
var ErrNotFailed = errors.New("catalog: the delivery has not failed")

// DeliveryStatus is where a delivery stands.
type DeliveryStatus string

const (
	DeliveryPending   DeliveryStatus = "pending"
	DeliveryDelivered DeliveryStatus = "delivered"
	DeliveryFailed    DeliveryStatus = "failed" // given up after its attempts, or refused for good
)

// NotificationEvent is an event as the catalog keeps it: the columns the
// console filters and shows, and the whole event as JSON in Data (opaque
// to the catalog; internal/notify defines it).
type NotificationEvent struct {
	ID       int64
	Time     time.Time
	Type     string
	Severity string
	Object   string
	Title    string
	Data     []byte
}

// Delivery is one event on its way to one target.
type Delivery struct {
	ID            int64
	EventID       int64
	Target        string
	Status        DeliveryStatus
	Attempts      int
	LastError     string
	CreatedAt     time.Time
	LastAttemptAt time.Time
	NextAttemptAt time.Time // pending only
	DeliveredAt   time.Time
	Event         NotificationEvent
}

// DeliveryAttempt is the outcome of one attempt.
type DeliveryAttempt struct {
	ID     int64
	At     time.Time
	Status DeliveryStatus // delivered; pending (again at Next); failed
	Error  string         // "" when delivered
	Next   time.Time      // pending only
}

// DeliveryFilter selects deliveries; zero fields match everything.
type DeliveryFilter struct {
	Status  DeliveryStatus
	Target  string
	EventID int64
	Since   time.Time // created at or after
	Limit   int
}
