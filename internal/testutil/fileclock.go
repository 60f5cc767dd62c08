package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// FileClock is a clock a test drives across processes: the time is
// what the file at Path says (RFC 3339), frozen until the test writes
// another, and every wait a process asks of it is appended to
// Path+".waits" (its deadline), so that the test knows when a server's
// schedules are waiting for a slot before it moves the clock there.
// `coffer server` in a test binary follows it when COFFER_TEST_CLOCK
// names the file (internal/cli/clitest; docs/13-development.md).
type FileClock struct {
	Path string

	mu      sync.Mutex
	waiters []fileWaiter
	polling bool
}

type fileWaiter struct {
	deadline time.Time
	ch       chan time.Time
}

// NewFileClock writes start to a new clock file in dir.
func NewFileClock(t *testing.T, dir string, start time.Time) *FileClock {
	t.Helper()
	c := &FileClock{Path: filepath.Join(dir, "clock")}
	c.Set(t, start)
	return c
}

// Set moves the clock to at (a test's side).
func (c *FileClock) Set(t *testing.T, at time.Time) {
	t.Helper()
	tmp := c.Path + ".new"
	if err := os.WriteFile(tmp, []byte(at.UTC().Format(time.RFC3339Nano)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, c.Path); err != nil {
		t.Fatal(err)
	}
}

// Waits lists the deadlines processes have waited for so far (a test's
// side), in the order asked.
func (c *FileClock) Waits(t *testing.T) []time.Time {
	t.Helper()
	b, err := os.ReadFile(c.Path + ".waits")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []time.Time
	for _, line := range strings.Fields(string(b)) {
		at, err := time.Parse(time.RFC3339Nano, line)
		if err != nil {
			t.Fatalf("clock waits: %v", err)
		}
		out = append(out, at)
	}
	return out
}

// WaitedFor reports whether some process waits (or waited) for at.
func (c *FileClock) WaitedFor(t *testing.T, at time.Time) bool {
	t.Helper()
	for _, w := range c.Waits(t) {
		if w.Equal(at) {
			return true
		}
	}
	return false
}

// Now reads the clock (a server's side). A clock file that cannot be
// read stops the process: the test is broken.
func (c *FileClock) Now() time.Time {
	b, err := os.ReadFile(c.Path)
	if err != nil {
		panic(fmt.Sprintf("test clock: %v", err))
	}
	at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		panic(fmt.Sprintf("test clock %s: %v", c.Path, err))
	}
	return at
}

// After fires once the clock has reached now+d (a server's side). It
// records the deadline in the waits file for the test.
func (c *FileClock) After(d time.Duration) <-chan time.Time {
	deadline := c.Now().Add(d)
	f, err := os.OpenFile(c.Path+".waits", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		panic(fmt.Sprintf("test clock: %v", err))
	}
	_, err = fmt.Fprintln(f, deadline.UTC().Format(time.RFC3339Nano))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		panic(fmt.Sprintf("test clock: %v", err))
	}
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiters = append(c.waiters, fileWaiter{deadline: deadline, ch: ch})
	if !c.polling {
		c.polling = true
		go c.poll()
	}
	return ch
}

// poll fires the waits whose deadline the file's time has reached. A
// wait nobody reads any more (its scheduler chose another branch) fires
// into its buffer and is dropped.
func (c *FileClock) poll() {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		now := c.Now()
		c.mu.Lock()
		kept := c.waiters[:0]
		for _, w := range c.waiters {
			if now.Before(w.deadline) {
				kept = append(kept, w)
				continue
			}
			w.ch <- now
		}
		c.waiters = kept
		c.mu.Unlock()
	}
}
