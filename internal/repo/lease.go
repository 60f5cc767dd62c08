package repo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/store"
)

// Leases say who works on a repository. Every session that writes or reads
// data holds a shared lease (locks/<random ID>); maintenance (garbage
// collection) additionally holds the single maintenance lease
// (locks/maintenance), created with a conditional write. Leases expire
// unless refreshed, so a crashed process never blocks others for longer than
// one TTL, and a process on the same host that is gone is recognised at
// once (its PID no longer runs with the recorded start time).
//
// Only maintenance excludes maintenance: backups never wait for garbage
// collection, which instead defers deletions until every session that was
// live when it planned them has ended (see package gc).
const (
	locksPrefix     = "locks/"
	maintenanceName = locksPrefix + "maintenance"
	leaseSeal       = "lease"
)

// ErrLocked is returned (wrapped in *LockedError) when maintenance is
// already running.
var ErrLocked = errors.New("repository is locked")

// ErrLeaseLost means a session's lease could not be kept alive (or was
// taken over); the session must stop before committing anything.
var ErrLeaseLost = errors.New("repository lease lost")

// LockedError names the holder of a conflicting lease.
type LockedError struct{ Holder LeaseInfo }

func (e *LockedError) Error() string {
	h := e.Holder
	return fmt.Sprintf("repository is locked by %s on %s (pid %d, user %s) since %s; the lease expires at %s unless renewed",
		h.Kind, h.Host, h.PID, h.User, h.Created.Local().Format(time.DateTime), h.Expires.Local().Format(time.DateTime))
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// LeaseInfo is the content of a lease object.
type LeaseInfo struct {
	Name        string    `json:"-"`
	Kind        string    `json:"kind"` // backup, restore, gc, verify, copy, ...
	Session     string    `json:"session,omitempty"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	ProcStart   uint64    `json:"proc_start,omitempty"`
	User        string    `json:"user"`
	Created     time.Time `json:"created"`
	Refreshed   time.Time `json:"refreshed"`
	Expires     time.Time `json:"expires"`
	Description string    `json:"description,omitempty"`
	// Owner names whom the session works for beyond its process (a fleet
	// worker's registration), so that whoever gives up on that owner can
	// end its sessions at once (EndSessionsOf) instead of waiting for the
	// lease to expire.
	Owner string `json:"owner,omitempty"`
	// Ended is when the session was declared dead (EndSession): its packs
	// are indexed and its holder can no longer refresh the lease, which
	// stays until it expires (or its holder releases it), because garbage
	// collection must wait for a holder that may in fact still run.
	Ended time.Time `json:"ended,omitzero"`
	// Unreadable marks a lease object that could not be decoded.
	Unreadable bool `json:"-"`
}

// Dead reports whether the holder can no longer be working: the lease
// expired, or it was taken on this host by a process that is gone.
func (l LeaseInfo) Dead(now time.Time, hostname string) bool {
	if now.After(l.Expires) {
		return true
	}
	if l.Host == hostname && l.PID > 0 {
		start, err := procStart(l.PID)
		return err != nil || (l.ProcStart != 0 && start != l.ProcStart)
	}
	return false
}

// ProcessStart reads a process's start time (clock ticks since boot) so a
// reused PID is not mistaken for the original process. Leases record it
// for their holder, and the catalog for the process running a task, so
// both tell a gone process from a live one the same way.
func ProcessStart(pid int) (uint64, error) { return procStart(pid) }

func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may contain spaces
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return 0, errors.New("malformed stat")
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// Lease is a held lease, refreshed in the background until Release.
type Lease struct {
	r         *Repository
	info      LeaseInfo
	refreshMu sync.Mutex // one refresh at a time: each needs the last version
	mu        sync.Mutex
	version   string
	stop      chan struct{}
	done      chan struct{}
	lost      chan struct{}
	lostErr   error
	once      sync.Once
}

// Info returns the lease content.
func (l *Lease) Info() LeaseInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.info
}

// Lost is closed when the lease could not be renewed before it expired.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err returns ErrLeaseLost (wrapped) once Lost is closed.
func (l *Lease) Err() error {
	select {
	case <-l.lost:
		return l.lostErr
	default:
		return nil
	}
}

func (r *Repository) newLeaseInfo(kind, session, desc string) LeaseInfo {
	now := time.Now().UTC()
	start, _ := procStart(os.Getpid())
	return LeaseInfo{Kind: kind, Session: session, Host: r.hostname, PID: os.Getpid(), ProcStart: start,
		User: currentUser(), Created: now, Refreshed: now, Expires: now.Add(r.opts.LeaseTTL), Description: desc}
}

func (r *Repository) encodeLease(info LeaseInfo) []byte {
	raw, _ := json.Marshal(info)
	return r.key.Seal(nil, raw, leaseSeal)
}

func (r *Repository) readLease(ctx context.Context, fi store.ObjectInfo) (LeaseInfo, error) {
	b, err := store.Get(ctx, r.st, fi.Name, 0, -1)
	if err != nil {
		return LeaseInfo{}, err
	}
	info := LeaseInfo{Name: fi.Name}
	raw, err := r.key.Open(nil, b, leaseSeal)
	if err == nil {
		err = json.Unmarshal(raw, &info)
	}
	if err != nil {
		// An unreadable lease is treated as expiring two TTLs after it was
		// last written, so garbage cannot block maintenance forever.
		return LeaseInfo{Name: fi.Name, Kind: "unknown", Expires: fi.ModTime.Add(2 * r.opts.LeaseTTL), Unreadable: true}, nil
	}
	info.Name = fi.Name
	return info, nil
}

// Leases lists all leases.
func (r *Repository) Leases(ctx context.Context) ([]LeaseInfo, error) {
	var out []LeaseInfo
	err := r.st.List(ctx, locksPrefix, func(fi store.ObjectInfo) error {
		info, err := r.readLease(ctx, fi)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		out = append(out, info)
		return nil
	})
	return out, err
}

// AcquireLease takes a shared lease, or the maintenance lease when
// maintenance is true. The lease is refreshed until Release.
func (r *Repository) AcquireLease(ctx context.Context, kind, session, desc string, maintenance bool) (*Lease, error) {
	return r.acquireLease(ctx, r.newLeaseInfo(kind, session, desc), maintenance)
}

func (r *Repository) acquireLease(ctx context.Context, info LeaseInfo, maintenance bool) (*Lease, error) {
	l := &Lease{r: r, info: info, stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{})}
	if maintenance {
		info.Name = maintenanceName
		if err := r.takeMaintenance(ctx, l); err != nil {
			return nil, err
		}
	} else {
		info.Name = locksPrefix + id.Random().String()
		fi, err := store.Put(ctx, r.st, info.Name, r.encodeLease(info), store.PutOptions{})
		if err != nil {
			return nil, fmt.Errorf("write lease: %w", err)
		}
		l.version = fi.Version
	}
	l.info = info
	go l.refreshLoop()
	// Whatever this session deduplicates against or reads must have been
	// indexed while its lease was visible: garbage collection waits only
	// for sessions whose leases it can see (docs/design/repository-format.md,
	// "Garbage collection").
	if err := r.RefreshIndex(ctx); err != nil {
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	return l, nil
}

func (r *Repository) takeMaintenance(ctx context.Context, l *Lease) error {
	info := l.info
	info.Name = maintenanceName
	for attempt := 0; attempt < 3; attempt++ {
		fi, err := store.Put(ctx, r.st, maintenanceName, r.encodeLease(info), store.PutOptions{IfNotExists: true})
		if err == nil {
			l.version = fi.Version
			return nil
		}
		if !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("take maintenance lease: %w", err)
		}
		cur, err := r.st.Stat(ctx, maintenanceName)
		if errors.Is(err, store.ErrNotFound) {
			continue // released meanwhile
		} else if err != nil {
			return err
		}
		holder, err := r.readLease(ctx, cur)
		if errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return err
		}
		if !holder.Dead(time.Now(), r.hostname) {
			return &LockedError{Holder: holder}
		}
		r.log.Warn("taking over a dead maintenance lease", "holder_host", holder.Host, "holder_pid", holder.PID, "since", holder.Created)
		fi, err = store.Put(ctx, r.st, maintenanceName, r.encodeLease(info), store.PutOptions{IfMatch: cur.Version})
		if err == nil {
			l.version = fi.Version
			return nil
		}
		if !errors.Is(err, store.ErrPreconditionFailed) && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("take over maintenance lease: %w", err)
		}
	}
	return fmt.Errorf("maintenance lease is contended: %w", ErrLocked)
}

func (l *Lease) refreshLoop() {
	defer close(l.done)
	ttl := l.r.opts.LeaseTTL
	tick := time.NewTicker(ttl / 4)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		if err := l.refresh(); err != nil {
			l.r.log.Warn("lease refresh failed", "lease", l.info.Name, "err", err)
			if time.Now().After(l.Info().Expires.Add(-ttl/8)) || errors.Is(err, store.ErrPreconditionFailed) || errors.Is(err, store.ErrNotFound) {
				l.markLost(fmt.Errorf("%w: %v", ErrLeaseLost, err))
				return
			}
		}
	}
}

// Check confirms that the lease is still held before a commit that other
// processes will rely on (a backup point's manifest). A process that was
// stopped (SIGSTOP, a paused VM) for longer than the refresh interval may
// have been declared dead meanwhile and its work collected; so when the
// last refresh is older than that interval, Check refreshes now and fails
// if the lease was removed or taken over.
func (l *Lease) Check(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	select {
	case <-l.stop:
		return fmt.Errorf("%w: the lease was released", ErrLeaseLost)
	default:
	}
	if time.Since(l.Info().Refreshed) < l.r.opts.LeaseTTL/4 {
		return nil
	}
	if err := l.refresh(); err != nil {
		err = fmt.Errorf("%w: %v", ErrLeaseLost, err)
		l.markLost(err)
		return err
	}
	return nil
}

func (l *Lease) refresh() error {
	l.refreshMu.Lock()
	defer l.refreshMu.Unlock()
	l.mu.Lock()
	info := l.info
	version := l.version
	l.mu.Unlock()
	now := time.Now().UTC()
	info.Refreshed, info.Expires = now, now.Add(l.r.opts.LeaseTTL)
	ctx, cancel := context.WithTimeout(context.Background(), l.r.opts.LeaseTTL/4)
	defer cancel()
	// IfMatch detects a lease that was deleted or taken over meanwhile.
	opts := store.PutOptions{}
	if l.r.st.Properties().ConditionalWrites {
		opts.IfMatch = version
	} else if _, err := l.r.st.Stat(ctx, info.Name); err != nil {
		return err // removed by another process: do not recreate it
	}
	fi, err := store.Put(ctx, l.r.st, info.Name, l.r.encodeLease(info), opts)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.info, l.version = info, fi.Version
	l.mu.Unlock()
	return nil
}

func (l *Lease) markLost(err error) {
	l.once.Do(func() {
		l.lostErr = err
		close(l.lost)
	})
}

// Abandon stops refreshing without deleting the lease: the session's work
// is left for crash recovery (RecoverDeadSessions), exactly as if the
// process had died.
func (l *Lease) Abandon() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// Release stops refreshing and deletes the lease. With credentials that may
// not delete (append-only), the lease is left to expire.
func (l *Lease) Release(ctx context.Context) error {
	select {
	case <-l.stop:
		return nil
	default:
		close(l.stop)
	}
	<-l.done
	err := l.r.st.Delete(ctx, l.info.Name)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if errors.Is(err, store.ErrPermission) || errors.Is(err, store.ErrRetained) {
		l.r.log.Info("lease left to expire (no delete permission)", "lease", l.info.Name)
		return nil
	}
	return err
}
