package fake

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Snapshot implements hypervisor.Connector: it journals the snapshot object,
// waits the modelled create latency, and freezes every disk at once.
func (c *Connector) Snapshot(ctx context.Context, ref hypervisor.VMRef, req hypervisor.SnapshotRequest) (hypervisor.Session, error) {
	c.mu.Lock()
	st := c.byID[ref.ID]
	if st == nil {
		st = c.byNameLocked(ref.Name)
	}
	if st == nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("vm %s: %w", ref.Name, hypervisor.ErrNotFound)
	}
	st.attempts++
	attempt := uint64(st.attempts)
	f := st.fault
	if st.fault.times > 0 {
		if st.fault.times--; st.fault.times == 0 {
			st.fault.err = nil
		}
	}
	c.gauge.enter(st.vm)
	unhang := c.unhang
	c.mu.Unlock()
	fail := func(err error) (hypervisor.Session, error) {
		c.mu.Lock()
		c.gauge.leave(st.vm)
		c.mu.Unlock()
		return nil, fmt.Errorf("vm %s: %w", st.vm.Name, err)
	}
	switch {
	case f.hang && f.ignoreCtx:
		<-unhang // a management call that does not honour cancellation
	case f.hang:
		<-ctx.Done()
		return fail(ctx.Err())
	case f.err != nil:
		return fail(f.err)
	case unit(mix(c.o.Seed, uint64(len(st.vm.ID)), hashString(st.vm.ID), attempt, 0x7a)) < c.o.TransientRate:
		return fail(fmt.Errorf("%w: host busy (injected, attempt %d)", hypervisor.ErrTransient, attempt))
	}
	var warnings []string
	achieved := req.Mode
	switch req.Mode {
	case "":
		achieved = hypervisor.CrashConsistent
	case hypervisor.WithMemory:
		return fail(fmt.Errorf("with-memory snapshots: %w by the fake connector", hypervisor.ErrUnsupported))
	case hypervisor.Quiesced:
		if !st.vm.GuestAgent {
			if req.Quiesce == hypervisor.QuiesceRequired {
				return fail(fmt.Errorf("%w: no guest agent answered", hypervisor.ErrQuiesceFailed))
			}
			warnings = append(warnings, "guest agent not answering: snapshot is crash-consistent")
			achieved = hypervisor.CrashConsistent
		}
	}
	s := &session{c: c, st: st, name: "coffer-" + req.SessionID, warnings: warnings, achieved: achieved}
	// Journal first: a crash during the create must leave a findable object.
	c.mu.Lock()
	st.objects[s.name] = &object{kind: "vm-snapshot", session: s}
	c.live[s] = true
	c.mu.Unlock()
	if err := c.op(ctx, st, c.o.SnapshotCreate, mix(hashString(st.vm.ID), attempt, 1)); err != nil {
		c.mu.Lock()
		delete(st.objects, s.name)
		delete(c.live, s)
		c.mu.Unlock()
		return fail(fmt.Errorf("snapshot create: %w", err))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.creates++
	c.gen++
	s.gen = c.gen
	for _, d := range st.disks {
		ds := hypervisor.DiskSnapshot{DiskInfo: d.info, Kind: hypervisor.KindDisk, Changes: "full", NewToken: strconv.Itoa(s.gen)}
		var changed map[int64]bool
		if tok, ok := req.Since[d.info.Key]; ok {
			g, _ := strconv.Atoi(tok)
			if set, ok := d.dirty[g]; ok {
				changed = make(map[int64]bool, len(set))
				for b := range set {
					changed[b] = true
				}
				ds.Changes = "incremental"
				if req.Differential {
					ds.Changes = "differential"
				}
			} else {
				ds.ChangeWarning = "change tracking bitmap missing"
			}
		}
		d.startGeneration(s.gen)
		s.disks = append(s.disks, ds)
		s.frozen = append(s.frozen, copyVersions(d.written))
		s.changed = append(s.changed, changed)
	}
	return s, nil
}

func (d *diskState) startGeneration(g int) {
	d.dirty[g] = map[int64]bool{}
	d.order = append(d.order, g)
	for len(d.order) > maxGenerations {
		delete(d.dirty, d.order[0])
		d.order = d.order[1:]
	}
}

func (d *diskState) dropGeneration(g int) { delete(d.dirty, g) }

func copyVersions(m map[int64]uint32) map[int64]uint32 {
	out := make(map[int64]uint32, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// op waits one modelled hypervisor operation, stretched by the number of
// operations in flight on the same host.
func (c *Connector) op(ctx context.Context, st *vmState, l Latency, key uint64) error {
	c.mu.Lock()
	c.hostOps[st.vm.Host]++
	n := c.hostOps[st.vm.Host]
	c.mu.Unlock()
	d := l.draw(mix(c.o.Seed, key))
	d += time.Duration(float64(d) * c.o.Contention * float64(n-1))
	err := c.o.Sleep(ctx, d)
	c.mu.Lock()
	c.opTime += d
	c.hostOps[st.vm.Host]--
	c.mu.Unlock()
	return err
}

// errGone is what a session of a crashed coffer process answers.
var errGone = errors.New("fake: the coffer process that owned this session is gone")

type session struct {
	c        *Connector
	st       *vmState
	name     string
	gen      int
	disks    []hypervisor.DiskSnapshot
	frozen   []map[int64]uint32
	changed  []map[int64]bool
	warnings []string
	achieved hypervisor.SnapshotMode
	released bool
	closed   bool
	dead     bool
	tokens   map[string]string
}

func (s *session) Config() hypervisor.VMConfig {
	vm := s.st.vm
	return hypervisor.VMConfig{Kind: s.c.o.Kind, Name: vm.Name, UUID: vm.ID, CPUs: 2, MemoryMiB: 2048,
		Disks: append([]hypervisor.DiskInfo(nil), vm.Disks...)}
}

func (s *session) Disks() []hypervisor.DiskSnapshot      { return s.disks }
func (s *session) Warnings() []string                    { return s.warnings }
func (s *session) AchievedMode() hypervisor.SnapshotMode { return s.achieved }

// Release removes the VM snapshot but keeps the change sets (group mode).
func (s *session) Release(ctx context.Context) error {
	c := s.c
	c.mu.Lock()
	switch {
	case s.dead:
		c.mu.Unlock()
		return errGone
	case s.closed:
		c.mu.Unlock()
		return errors.New("fake: session closed")
	case s.released:
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	if err := c.op(ctx, s.st, c.o.SnapshotRemove, mix(hashString(s.name), 2)); err != nil {
		return fmt.Errorf("snapshot remove: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !s.released && !s.dead {
		s.released = true
		delete(s.st.objects, s.name)
		c.removes++
		c.gauge.leave(s.st.vm)
	}
	return nil
}

// Close removes the snapshot (unless released) and settles tracking.
func (s *session) Close(ctx context.Context, ok bool) (map[string]string, error) {
	c := s.c
	c.mu.Lock()
	if s.dead {
		c.mu.Unlock()
		return nil, errGone
	}
	if s.closed {
		defer c.mu.Unlock()
		return s.tokens, nil
	}
	released := s.released
	c.mu.Unlock()
	var rerr error
	if !released {
		rerr = c.op(ctx, s.st, c.o.SnapshotRemove, mix(hashString(s.name), 2))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.closed || s.dead {
		return s.tokens, nil
	}
	s.closed = true
	delete(c.live, s)
	if !released {
		c.gauge.leave(s.st.vm)
		if rerr == nil {
			delete(s.st.objects, s.name)
			c.removes++
		} else {
			s.st.objects[s.name].session = nil // left behind: CleanupLeftovers takes it
		}
	}
	if !ok || rerr != nil {
		c.closedFail++
		for _, d := range s.st.disks {
			d.dropGeneration(s.gen)
		}
		if rerr != nil {
			return nil, fmt.Errorf("snapshot remove: %w", rerr)
		}
		return nil, nil
	}
	c.closedOK++
	s.tokens = map[string]string{}
	for _, d := range s.disks {
		s.tokens[d.Key] = d.NewToken
	}
	return s.tokens, nil
}

func (s *session) OpenDisk(ctx context.Context, key string) (hypervisor.DiskReader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.closed || s.dead {
		return nil, errors.New("fake: session closed")
	}
	for i, d := range s.disks {
		if d.Key == key {
			return &reader{ctx: ctx, c: s.c, sess: s, disk: s.st.disks[i], frozen: s.frozen[i], changed: s.changed[i]}, nil
		}
	}
	return nil, fmt.Errorf("disk %s: %w", key, hypervisor.ErrNotFound)
}
