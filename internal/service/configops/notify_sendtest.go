package configops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/notify"
)

// TestNotification sends a test message to one notification target of
// the configuration in effect (the file's and the API's, enabled or not)
// and says whether it was accepted: an operator checks a target's
// address, credentials and TLS before an alert depends on it. Nothing is
// recorded as a delivery. It reads the configuration in effect itself
// rather than asking the notifier, so that a target created through the
// API a moment ago is tested before the notifier reloads.
func (s Ops) TestNotification(ctx context.Context, in *api.TestNotificationTargetInput) (*api.NotificationTest, error) {
	st, err := s.ReadConfig(ctx)
	if err != nil {
		return nil, err
	}
	t, ok := st.Notify.Target(in.Name)
	if !ok {
		return nil, api.Errorf(api.NotFound, "no notification target is named %q (`coffer config list notification-targets` lists them)", in.Name)
	}
	if err := notify.SendTest(ctx, t, time.Duration(st.Notify.Delivery.WithDefaults().Timeout)); err != nil {
		// The target as configured does not take messages: what to fix is
		// in its settings (or the server it names), so it is bad input.
		return nil, service.Invalidf("the test message was not accepted: %v; check the target's address, credentials and TLS settings, then test again", err)
	}
	return &api.NotificationTest{Target: t.Name, Kind: t.Kind(), SentAt: time.Now().UTC()}, nil
}
