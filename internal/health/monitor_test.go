package health

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
	"github.com/coffer-backup/coffer/internal/metrics"
	"github.com/coffer-backup/coffer/internal/policy"
)

// A check counts the notification deliveries waiting and given up by
// target, says the catalog answered, and says it did not once it stops
// answering.
func TestCheckCountsDeliveriesAndProbesTheCatalog(t *testing.T) {
	ctx := context.Background()
	cat, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		ds, err := cat.AddNotification(ctx, &catalog.NotificationEvent{Type: "task-failed", Severity: "error", Title: "t", Data: []byte(`{}`)}, []string{"mail", "hook"})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 { // the hook gave the first one up
			if err := cat.RecordDeliveryAttempt(ctx, catalog.DeliveryAttempt{ID: ds[1].ID, At: time.Now(), Status: catalog.DeliveryFailed, Error: "503"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	m := metrics.New()
	mon := New(Options{Catalog: cat, Config: &policy.Config{}, Metrics: m})
	if err := mon.Check(ctx); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP coffer_notification_deliveries_failed Notification deliveries given up in the last 24 hours, by target (at most 10000 counted): what they said reached nobody there.
# TYPE coffer_notification_deliveries_failed gauge
coffer_notification_deliveries_failed{target="hook"} 1
# HELP coffer_notification_deliveries_pending Notification deliveries waiting to be sent or retried, by target (at most 10000 counted): a backlog that grows means a target does not answer.
# TYPE coffer_notification_deliveries_pending gauge
coffer_notification_deliveries_pending{target="hook"} 2
coffer_notification_deliveries_pending{target="mail"} 3
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "coffer_notification_deliveries_failed", "coffer_notification_deliveries_pending"); err != nil {
		t.Fatal(err)
	}
	if got := reachable(t, m); got != 1 {
		t.Fatalf("coffer_catalog_reachable = %v after a check that read it", got)
	}
	if err := cat.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mon.Check(ctx); err == nil {
		t.Fatal("a check of a closed catalog succeeded")
	}
	if got := reachable(t, m); got != 0 {
		t.Fatalf("coffer_catalog_reachable = %v after the catalog stopped answering", got)
	}
}

func reachable(t *testing.T, m *metrics.Metrics) float64 {
	t.Helper()
	fams, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "coffer_catalog_reachable" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("coffer_catalog_reachable is not exposed")
	return -1
}
