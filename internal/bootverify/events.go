package bootverify

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/coffer-backup/coffer/internal/qmp"
)

// watcher follows the VM's events for step 2: a guest panic (pvpanic's
// GUEST_PANICKED), a boot loop (RESET events), or the VM shutting down.
type watcher struct {
	maxResets int
	mu        sync.Mutex
	resets    int
	why       string
	ch        chan struct{}
}

func watch(sub *qmp.Subscription, maxResets int) *watcher {
	w := &watcher{maxResets: maxResets, ch: make(chan struct{})}
	go func() {
		for ev := range sub.C {
			w.mu.Lock()
			switch ev.Name {
			case "GUEST_PANICKED":
				var d struct {
					Action string `json:"action"`
				}
				_ = json.Unmarshal(ev.Data, &d)
				w.fail(fmt.Sprintf("the guest panicked (GUEST_PANICKED, action %s)", d.Action))
			case "RESET":
				w.resets++
				if w.resets >= w.maxResets {
					w.fail(fmt.Sprintf("boot loop: the guest reset %d times", w.resets))
				}
			case "SHUTDOWN":
				var d struct {
					Reason string `json:"reason"`
				}
				_ = json.Unmarshal(ev.Data, &d)
				if d.Reason != "host-qmp-quit" {
					w.fail("the VM shut down (" + d.Reason + ")")
				}
			}
			close(w.ch)
			w.ch = make(chan struct{})
			w.mu.Unlock()
		}
		// The monitor closed: QEMU is gone (or coffer quit it, after the
		// ladder).
		w.mu.Lock()
		w.fail("QEMU exited")
		close(w.ch)
		w.ch = make(chan struct{})
		w.mu.Unlock()
	}()
	return w
}

// fail keeps the first reason. Called with mu held.
func (w *watcher) fail(why string) {
	if w.why == "" {
		w.why = why
	}
}

func (w *watcher) failure() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.why
}

func (w *watcher) resetCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resets
}

// changed is closed at the next event.
func (w *watcher) changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch
}
