package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
	"github.com/coffer-backup/coffer/internal/configobj"
)

// DefaultConfigPoll is how often a watcher of the configuration (the
// server's schedules) asks the catalog whether another process changed an
// object: one small read of one number.
const DefaultConfigPoll = 2 * time.Second

// configState caches the configuration in effect by the catalog's
// generation, and tells this process's watchers of the changes it makes.
type configState struct {
	mu    sync.Mutex
	state *configobj.State
	// poke is closed (and replaced) when this process changes an object,
	// so its watchers reload at once instead of at their next poll.
	poke chan struct{}
	// file replaces Config's file sections once the server has read its
	// configuration file again (ReloadFile); reloads counts those reads,
	// stateReloads is the count the cached state was merged at.
	file                  *configobj.File
	reloads, stateReloads int
}

func newConfigState() *configState { return &configState{poke: make(chan struct{})} }

func (c *configState) cached() *configobj.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

func (c *configState) keep(st *configobj.State, reloads int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if reloads != c.reloads {
		return // merged with a file read before the last reload
	}
	if c.state == nil || st.Generation >= c.state.Generation || reloads != c.stateReloads {
		c.state, c.stateReloads = st, reloads
	}
}

// current is the cached state when it was merged at generation gen with
// the file in effect, and the count of file reads.
func (c *configState) current(gen int64) (*configobj.State, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != nil && c.state.Generation == gen && c.stateReloads == c.reloads {
		return c.state, c.reloads
	}
	return nil, c.reloads
}

func (c *configState) changed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.poke)
	c.poke = make(chan struct{})
}

func (c *configState) pokes() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.poke
}

// CachedConfig is the configuration in effect as last read, nil before
// the first read.
func (s *Service) CachedConfig() *configobj.State { return s.conf.cached() }

// ConfigChanged tells the watchers of the configuration that this process
// changed an object.
func (s *Service) ConfigChanged() { s.conf.changed() }

// FileConfig is what the configuration file says.
func (s *Service) FileConfig() configobj.File {
	s.conf.mu.Lock()
	defer s.conf.mu.Unlock()
	if s.conf.file != nil {
		return *s.conf.file
	}
	return configobj.File{Path: s.Config.EngineSource, Engine: s.Config.Engine, Notify: s.Config.Notify, Maintenance: s.Config.Maintenance}
}

// ReadConfig returns the configuration in effect: the file merged with
// the objects of the catalog (configobj.Merge, the one place that does
// it). Every operation that reads the configuration starts here. Without
// a catalog yet (a SQLite file that does not exist), it is the file's:
// nothing is created to find that out.
func (s *Service) ReadConfig(ctx context.Context) (*configobj.State, error) {
	if !s.catalogMayExist() {
		st, err := configobj.Merge(s.FileConfig(), nil, 0)
		if err != nil {
			return nil, Invalidf("%v", err)
		}
		return st, nil
	}
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, fmt.Errorf("the configuration in effect includes the objects of the catalog, which cannot be opened: %w", err)
	}
	defer cat.Close()
	return s.effectiveFrom(ctx, cat)
}

// effectiveFrom reads the configuration in effect from an open catalog,
// reusing the cached state while the generation has not moved.
func (s *Service) effectiveFrom(ctx context.Context, cat catalog.Catalog) (*configobj.State, error) {
	st, _, err := s.stateAt(ctx, cat)
	return st, err
}

// stateAt is effectiveFrom with the count of file reloads the state was
// merged at or after (it is read before the file: a watcher comparing
// counts may reload twice, never miss one).
func (s *Service) stateAt(ctx context.Context, cat catalog.Catalog) (*configobj.State, int, error) {
	gen, err := cat.ConfigGeneration(ctx)
	if err != nil {
		return nil, 0, err
	}
	st, reloads := s.conf.current(gen)
	if st != nil {
		return st, reloads, nil
	}
	objs, gen, err := cat.ListConfigObjects(ctx)
	if err != nil {
		return nil, 0, err
	}
	if st, err = configobj.Merge(s.FileConfig(), objs, gen); err != nil {
		return nil, 0, Invalidf("%v", err)
	}
	s.conf.keep(st, reloads)
	return st, reloads, nil
}

// ReloadFile makes f the configuration file's sections in effect (the
// server read its file again on SIGHUP), once merged with the catalog's
// objects they pass the checks a change through the API passes; else it
// returns why and the sections in effect stay. The watchers of the
// configuration (WatchConfig) reload at once, as after a change of an
// object.
func (s *Service) ReloadFile(ctx context.Context, f configobj.File) error {
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return err
	}
	defer cat.Close()
	objs, gen, err := cat.ListConfigObjects(ctx)
	if err != nil {
		return err
	}
	st, err := configobj.Merge(f, objs, gen)
	if err != nil {
		return Invalidf("%v", err)
	}
	if err := s.CheckConfig(st.Engine, st.Notify, st.Maintenance); err != nil {
		return Invalidf("%s: %v", ConfigWhere(st), err)
	}
	s.conf.mu.Lock()
	s.conf.file, s.conf.state = &f, nil
	s.conf.reloads++
	s.conf.mu.Unlock()
	s.conf.changed()
	return nil
}

// ConfigInEffect is the configuration this process read last (the one the
// operation in progress runs on), read now if it has read none.
func (s *Service) ConfigInEffect(ctx context.Context) (*configobj.State, error) {
	if st := s.conf.cached(); st != nil {
		return st, nil
	}
	return s.ReadConfig(ctx)
}

// catalogMayExist is false only for a SQLite catalog whose file does not
// exist yet.
func (s *Service) catalogMayExist() bool {
	loc := s.catalogLocation()
	if strings.Contains(loc, "://") || loc == sqlite.Memory {
		return true
	}
	_, err := os.Stat(loc)
	return !errors.Is(err, os.ErrNotExist)
}

// WatchConfig sends the configuration in effect now, then again each time
// it changes: at once for the changes this Service makes, within
// Config.ConfigPoll for those of other processes and servers (which it
// notices by the catalog's generation). A reader that falls behind gets
// the newest state, not every one in between. The channel closes when ctx
// ends. The server's schedules reload from it (RunSchedules); the
// notifier and other loops of the server subscribe the same way.
//
// A change that cannot be read (the catalog unreachable for a while) is
// logged and the watcher keeps the state it had.
func (s *Service) WatchConfig(ctx context.Context) (<-chan *configobj.State, error) {
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	// Taken before each read: a change made after it wakes the watcher,
	// even one made before the loop below starts waiting.
	poked := s.conf.pokes()
	st, reloads, err := s.stateAt(ctx, cat)
	if err != nil {
		cat.Close()
		return nil, err
	}
	out := make(chan *configobj.State, 1)
	out <- st
	poll := s.Config.ConfigPoll
	if poll <= 0 {
		poll = DefaultConfigPoll
	}
	go func() {
		defer close(out)
		defer cat.Close()
		tick := time.NewTicker(poll)
		defer tick.Stop()
		lastGen, lastReloads := st.Generation, reloads
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			case <-poked:
			}
			poked = s.conf.pokes()
			st, reloads, err := s.stateAt(ctx, cat)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("reading the configuration objects of the catalog failed: keeping the configuration in effect", "err", err)
				}
				continue
			}
			if st.Generation == lastGen && reloads == lastReloads {
				continue
			}
			lastGen, lastReloads = st.Generation, reloads
			select { // replace a state the reader has not taken yet
			case <-out:
			default:
			}
			out <- st
		}
	}()
	return out, nil
}
