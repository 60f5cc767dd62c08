package notify

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// TestRestartResumesPending: what one process recorded and did not send
// (it emitted and stopped before its dispatcher ran, or it stopped in the
// middle of an attempt) is delivered by the next process on the catalog.
func TestRestartResumesPending(t *testing.T) {
	e := newEnv(t)
	hook, target := e.newReceiver("hook")
	hold := make(chan struct{})
	hook.setHold(hold)
	cfg := &Config{Targets: []Target{target}, Delivery: fast}

	// Process 1 records an event and stops without sending (a CLI
	// command that failed and exited).
	first, err := New(cfg, e.cat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.emit(first, sampleEvents()[TypeVerifyDamage])
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Process 2 starts sending it, and is stopped mid-attempt (Close
	// gives up waiting at once).
	second := e.start(cfg)
	<-hook.arrived
	e.emit(second, sampleEvents()[TypeTaskFailed])
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := second.Close(cancelled); err == nil {
		t.Fatal("Close with a cancelled context reported no error")
	}
	// Close waited for the attempts it cut short to be recorded: they
	// are all reported by now (one or two, as the second event may not
	// have been claimed yet).
	var interrupted []Attempt
	for len(e.attempts) > 0 {
		interrupted = append(interrupted, <-e.attempts)
	}
	if len(interrupted) == 0 {
		t.Fatal("no attempt was reported interrupted")
	}
	for _, a := range interrupted {
		d := e.delivery(a.Delivery)
		if d.Status != catalog.DeliveryPending || d.Attempts != 1 || !strings.HasPrefix(d.LastError, "interrupted: coffer stopped") {
			t.Fatalf("interrupted delivery %+v", d)
		}
	}
	pending := e.deliveries(catalog.DeliveryFilter{Status: catalog.DeliveryPending})
	if len(pending) != 2 {
		t.Fatalf("%d deliveries pending after the stop, want 2", len(pending))
	}

	// Process 3, on its own handle of the catalog, delivers both.
	hook.setHold(nil)
	close(hold)
	e.start(cfg, e.openCatalog())
	for range 2 {
		a := e.waitAttempt("delivery by the next process", func(a Attempt) bool { return true })
		if a.Status != catalog.DeliveryDelivered {
			t.Fatalf("attempt %+v", a)
		}
	}
	if left := e.deliveries(catalog.DeliveryFilter{Status: catalog.DeliveryPending}); len(left) != 0 {
		t.Fatalf("still pending: %+v", left)
	}
	if n := len(e.deliveries(catalog.DeliveryFilter{Status: catalog.DeliveryDelivered})); n != 2 {
		t.Fatalf("%d delivered, want 2", n)
	}
}

// TestKilledSenderResumed: a process killed while a delivery is on the
// wire leaves it claimed; when its lease runs out the next process sends
// it again (at least once: the receiver sees the same delivery ID twice).
func TestKilledSenderResumed(t *testing.T) {
	e := newEnv(t)
	hook, target := e.newReceiver("hook")
	hook.setHold(make(chan struct{})) // the first request never gets an answer
	child := exec.Command(os.Args[0], "-test.run=^TestHelperSenderProcess$", "-test.v")
	child.Env = append(os.Environ(), "COFFER_NOTIFY_HELPER=1", "COFFER_NOTIFY_CATALOG="+e.catPath,
		"COFFER_NOTIFY_URL="+target.Webhook.URL, "COFFER_NOTIFY_CA="+target.Webhook.CAFile)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	first := <-hook.arrived
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	ds := e.deliveries(catalog.DeliveryFilter{})
	if len(ds) != 1 || ds[0].Status != catalog.DeliveryPending || ds[0].Attempts != 0 || !ds[0].NextAttemptAt.After(time.Now()) {
		t.Fatalf("after the kill: %+v (want one claimed delivery, due when its lease ends)", ds)
	}
	hook.setHold(nil)
	e.start(&Config{Targets: []Target{target}, Delivery: helperDelivery})
	a := e.waitAttempt("delivery after the lease", func(a Attempt) bool { return true })
	if a.Status != catalog.DeliveryDelivered || a.Delivery != ds[0].ID {
		t.Fatalf("attempt %+v", a)
	}
	second := hook.requests()[1]
	if id := first.header.Get(HeaderDelivery); id == "" || id != second.header.Get(HeaderDelivery) ||
		string(first.body) != string(second.body) {
		t.Fatalf("the resent request differs: %v %s / %v %s", first.header, first.body, second.header, second.body)
	}
}

// helperDelivery: attempts time out after 3 s, so a claim's lease is 6 s.
var helperDelivery = Delivery{Attempts: 5, Backoff: fast.Backoff, MaxBackoff: fast.MaxBackoff, Timeout: Duration(3 * time.Second)}

// TestHelperSenderProcess is the process TestKilledSenderResumed kills: it
// emits a failure to the webhook and sends it until killed.
func TestHelperSenderProcess(t *testing.T) {
	if os.Getenv("COFFER_NOTIFY_HELPER") != "1" {
		t.Skip("run by TestKilledSenderResumed")
	}
	e := &env{t: t, catPath: os.Getenv("COFFER_NOTIFY_CATALOG"), attempts: make(chan Attempt, 10), logs: &syncBuffer{}}
	e.cat = e.openCatalog()
	target := Target{Name: "hook", Webhook: &WebhookTarget{URL: os.Getenv("COFFER_NOTIFY_URL"),
		CAFile: os.Getenv("COFFER_NOTIFY_CA")}}
	n := e.start(&Config{Targets: []Target{target}, Delivery: helperDelivery})
	e.emit(n, sampleEvents()[TypeTaskFailed])
	a := <-e.attempts // not reached: the parent kills this process mid-attempt
	t.Fatalf("the attempt ended before the kill: %+v", a)
}
