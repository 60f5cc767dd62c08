package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Start delivers in the background until Close (or ctx ends): first what
// earlier processes left pending, then what is emitted, each retry when
// it falls due.
func (n *Notifier) Start(ctx context.Context) {
	sendCtx, cancelSends := context.WithCancel(ctx)
	loopCtx, stopLoop := context.WithCancel(sendCtx)
	n.cancelSends, n.stopLoop = cancelSends, stopLoop
	n.done = make(chan struct{})
	go n.run(loopCtx, sendCtx)
}

// Close stops claiming deliveries and waits for those in flight until ctx
// ends, then cancels them; an interrupted attempt stays pending, due at
// once, for the next process.
func (n *Notifier) Close(ctx context.Context) error {
	if n.stopLoop == nil {
		return nil
	}
	n.stopLoop()
	<-n.done
	idle := make(chan struct{})
	go func() { n.inflight.Wait(); close(idle) }()
	var err error
	select {
	case <-idle:
	case <-ctx.Done():
		err = ctx.Err()
		n.cancelSends()
		<-idle
	}
	n.cancelSends()
	return err
}

// run claims due deliveries while slots are free and sends each in its
// own goroutine (with sendCtx, which outlives ctx until Close gives up
// waiting), then sleeps until something is emitted, a slot frees, the
// next retry falls due or the poll interval passes.
func (n *Notifier) run(ctx, sendCtx context.Context) {
	defer close(n.done)
	lastPrune := time.Time{}
	for {
		if time.Since(lastPrune) > 24*time.Hour {
			n.prune(ctx)
			lastPrune = time.Now()
		}
		free := cap(n.slots) - len(n.slots)
		claimed := 0 // of free
		if free > 0 {
			ds, err := n.store.ClaimDeliveries(ctx, time.Now(), n.lease(), free)
			if err != nil && ctx.Err() == nil {
				n.log.Error("notifications: cannot read pending deliveries from the catalog", "err", err)
			}
			for _, d := range ds {
				n.slots <- struct{}{}
				n.inflight.Add(1)
				go func() {
					defer n.release()
					n.deliver(sendCtx, d)
				}()
			}
			claimed = len(ds)
		}
		if claimed == free {
			// Every slot is busy (or was taken just now, and more may be
			// due): claim again once one frees.
			select {
			case <-ctx.Done():
				return
			case <-n.slotFreed:
			}
			continue
		}
		wait := n.opts.PollInterval
		if next, err := n.store.NextDeliveryDue(ctx); err == nil && !next.IsZero() {
			wait = min(wait, max(time.Until(next), 0))
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-n.wake:
		case <-n.slotFreed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

func (n *Notifier) release() {
	<-n.slots
	n.inflight.Done()
	n.poke(n.slotFreed)
}

// lease is how long a claimed delivery is ours: twice what an attempt may
// take, so that only a process that died (or hangs) leaves one to run
// out, and the next process resends it then.
func (n *Notifier) lease() time.Duration {
	return 2 * n.delivery().timeout()
}

func (n *Notifier) delivery() Delivery {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.cfg.Delivery.WithDefaults()
}

func (d Delivery) timeout() time.Duration { return time.Duration(d.Timeout) }

// RetryWait is the wait after the attempt-th failed attempt: Backoff
// doubled attempt-1 times, at most MaxBackoff, then jittered to between
// half and all of it so that deliveries failing together spread out.
func (d Delivery) RetryWait(attempt int) time.Duration {
	d = d.WithDefaults()
	w := time.Duration(d.Backoff)
	for i := 1; i < attempt && w < time.Duration(d.MaxBackoff); i++ {
		w *= 2
	}
	w = min(w, time.Duration(d.MaxBackoff))
	return w/2 + rand.N(w/2+1)
}

func (n *Notifier) prune(ctx context.Context) {
	keep := time.Duration(n.delivery().Keep)
	if k, err := n.store.PruneNotifications(ctx, time.Now().Add(-keep)); err != nil && ctx.Err() == nil {
		n.log.Warn("notifications: cannot prune old delivery records", "err", err)
	} else if k > 0 {
		n.log.Info("notifications: pruned old delivery records", "events", k)
	}
}

// deliver makes one attempt of a claimed delivery and records it.
func (n *Notifier) deliver(ctx context.Context, d catalog.Delivery) {
	n.mu.RLock()
	s, ok := n.senders[d.Target]
	_, configured := n.cfg.Target(d.Target)
	conf := n.cfg.Delivery.WithDefaults()
	n.mu.RUnlock()
	a := Attempt{Delivery: d.ID, Event: d.EventID, Type: Type(d.Event.Type), Target: d.Target, Attempts: d.Attempts + 1}
	var err error
	var ev Event
	switch {
	case !configured:
		err = permanentError{fmt.Errorf("target %s is no longer configured", d.Target)}
	case !ok:
		err = permanentError{fmt.Errorf("target %s is disabled", d.Target)}
	default:
		if jerr := json.Unmarshal(d.Event.Data, &ev); jerr != nil {
			err = permanentError{fmt.Errorf("the recorded event %d cannot be read: %v", d.EventID, jerr)}
			break
		}
		ev.ID = d.EventID
		sctx, cancel := context.WithTimeout(ctx, conf.timeout())
		err = s.Send(sctx, ev, d.ID, conf.timeout())
		cancel()
	}
	now := time.Now()
	rec := catalog.DeliveryAttempt{ID: d.ID, At: now}
	switch {
	case err == nil:
		a.Status = catalog.DeliveryDelivered
	case ctx.Err() != nil:
		// Stopped mid-attempt: due again at once, for the next process.
		a.Status, a.Error, a.Next = catalog.DeliveryPending, "interrupted: coffer stopped during the attempt ("+err.Error()+")", now
	case isPermanent(err) || a.Attempts >= conf.Attempts:
		a.Status, a.Error = catalog.DeliveryFailed, err.Error()
	default:
		a.Status, a.Error, a.Next = catalog.DeliveryPending, err.Error(), now.Add(conf.RetryWait(a.Attempts))
	}
	rec.Status, rec.Error, rec.Next = a.Status, a.Error, a.Next
	// The record must land even when the attempt was cut short.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := n.store.RecordDeliveryAttempt(wctx, rec); err != nil {
		// The claim's lease runs out and the delivery is tried again:
		// at least once, never lost.
		n.log.Error("notifications: cannot record a delivery attempt", "delivery", d.ID, "target", d.Target, "err", err)
		return
	}
	switch a.Status {
	case catalog.DeliveryFailed:
		n.log.Error("notification not delivered: gave up", "target", d.Target, "delivery", d.ID, "event", d.Event.Type,
			"attempts", a.Attempts, "err", a.Error)
	case catalog.DeliveryPending:
		n.log.Warn("notification not delivered yet: will retry", "target", d.Target, "delivery", d.ID,
			"attempts", a.Attempts, "next", a.Next, "err", a.Error)
	default:
		n.log.Info("notification delivered", "target", d.Target, "delivery", d.ID, "event", d.Event.Type, "attempts", a.Attempts)
	}
	if n.opts.Observe != nil {
		n.opts.Observe(a)
	}
}
