package snapdesc

import (
	"strings"
	"testing"
)

// A description names its owner for Owner to read back; one without an
// owner reads as a single coffer's always did, and names none.
func TestOwnerRoundTrip(t *testing.T) {
	d := Of("job1-task2-1", "0a1b", "worker proxy1 epoch 3")
	if got := Owner(d); got != "worker proxy1 epoch 3" || !strings.HasPrefix(d, Prefix) || !strings.Contains(d, OwnerMark(got)) {
		t.Errorf("%q: owner %q", d, got)
	}
	single := Of("s", "0a1b", "")
	if want := Prefix + " s (installation 0a1b); removed automatically"; single != want || Owner(single) != "" {
		t.Errorf("a single coffer's description %q (owner %q), want %q", single, Owner(single), want)
	}
}

// A session that suspended the VM says so after its owner, which still
// reads back; one that did not says nothing of it.
func TestSuspendedMark(t *testing.T) {
	d := OfSuspended("job1-task2-1", "0a1b", "worker proxy1 epoch 3")
	if !Suspended(d) || Owner(d) != "worker proxy1 epoch 3" || !strings.Contains(d, OwnerMark("worker proxy1 epoch 3")) || !strings.HasPrefix(d, Prefix) {
		t.Errorf("%q: suspended %v, owner %q", d, Suspended(d), Owner(d))
	}
	if plain := Of("job1-task2-1", "0a1b", "worker proxy1 epoch 3"); Suspended(plain) {
		t.Errorf("%q reads as suspended", plain)
	}
}
