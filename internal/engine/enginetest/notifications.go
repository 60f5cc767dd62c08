package enginetest

import (
	"context"
	"errors"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// errNoNotifications: the engine records no notifications itself; tests
// of internal/notify use a real catalog (catalog/sqlite), which keeps
// claims and leases as the conformance suite checks.
var errNoNotifications = errors.New("enginetest.Catalog keeps no notifications: use a real catalog (catalog/sqlite)")

// noNotifications is the catalog.Notifications part of the test double.
type noNotifications struct{}

func (noNotifications) AddNotification(context.Context, *catalog.NotificationEvent, []string) ([]catalog.Delivery, error) {
	return nil, errNoNotifications
}

func (noNotifications) ClaimDeliveries(context.Context, time.Time, time.Duration, int) ([]catalog.Delivery, error) {
	return nil, errNoNotifications
}

func (noNotifications) RecordDeliveryAttempt(context.Context, catalog.DeliveryAttempt) error {
	return errNoNotifications
}

func (noNotifications) RetryDelivery(context.Context, int64, time.Time) error {
	return errNoNotifications
}

func (noNotifications) NextDeliveryDue(context.Context) (time.Time, error) {
	return time.Time{}, errNoNotifications
}

func (noNotifications) GetDelivery(context.Context, int64) (catalog.Delivery, error) {
	return catalog.Delivery{}, errNoNotifications
}

func (noNotifications) ListDeliveries(context.Context, catalog.DeliveryFilter) ([]catalog.Delivery, error) {
	return nil, errNoNotifications
}

func (noNotifications) PruneNotifications(context.Context, time.Time) (int, error) {
	return 0, errNoNotifications
}
