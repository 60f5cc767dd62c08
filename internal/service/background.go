package service

import (
	"context"
	"sync"

	"github.com/coffer-backup/coffer/internal/api"
)

// Background runs what an API request starts to go on after its answer:
// work that ends by itself (a policy run not waited for) and serving that
// goes on until it is stopped (an instant recovery's disks, an NBD
// export). The server drains it when it stops: serving stops at once (a
// recovered VM waits for its disks, and is served again by the next
// start), work is given until a deadline, then cancelled.
type Background struct {
	ctx    context.Context
	cancel context.CancelFunc
	work   sync.WaitGroup
	serves sync.WaitGroup
	mu     sync.Mutex
	stops  map[string]context.CancelFunc
	closed bool
}

// NewBackground returns a Background whose work and serving derive from
// ctx (the server's: its values, not its request's cancellation).
func NewBackground(ctx context.Context) *Background {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &Background{ctx: ctx, cancel: cancel, stops: map[string]context.CancelFunc{}}
}

// Work starts fn, which ends by itself, under a context of its own that
// carries the values of the request (the user who started it) but not
// its cancellation.
func (b *Background) Work(reqCtx context.Context, fn func(ctx context.Context)) error {
	ctx, cancel, err := b.begin(reqCtx, &b.work)
	if err != nil {
		return err
	}
	go func() {
		defer b.work.Done()
		defer cancel()
		fn(ctx)
	}()
	return nil
}

// Serve starts serving: start starts it with the context serving lives
// in, and returns its key (a session ID) and the function that serves
// until that context ends. Stop(key) or the drain ends it.
func (b *Background) Serve(reqCtx context.Context, start func(ctx context.Context) (key string, serve func() error, err error)) error {
	ctx, cancel, err := b.begin(reqCtx, &b.serves)
	if err != nil {
		return err
	}
	key, serve, err := start(ctx)
	if err != nil {
		cancel()
		b.serves.Done()
		return err
	}
	b.mu.Lock()
	if b.closed {
		cancel() // drained while it started: it stops with the rest
	} else {
		if old := b.stops[key]; old != nil {
			old()
		}
		b.stops[key] = cancel
	}
	b.mu.Unlock()
	go func() {
		defer b.serves.Done()
		_ = serve()
		b.mu.Lock()
		delete(b.stops, key)
		b.mu.Unlock()
		cancel()
	}()
	return nil
}

func (b *Background) begin(reqCtx context.Context, wg *sync.WaitGroup) (context.Context, context.CancelFunc, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, nil, api.Errorf(api.Cancelled, "%w: the server is stopping", context.Canceled)
	}
	ctx, cancel := context.WithCancel(mergeValues(b.ctx, reqCtx))
	wg.Add(1)
	return ctx, cancel, nil
}

// Stop ends the serving under key (nothing when there is none).
func (b *Background) Stop(key string) {
	b.mu.Lock()
	cancel := b.stops[key]
	delete(b.stops, key)
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Drain refuses new work, stops serving, and waits for running work until
// ctx ends; then it cancels the work and waits for it to return (work
// records its own cancellation).
func (b *Background) Drain(ctx context.Context) {
	b.mu.Lock()
	b.closed = true
	stops := b.stops
	b.stops = map[string]context.CancelFunc{}
	b.mu.Unlock()
	for _, cancel := range stops {
		cancel()
	}
	done := make(chan struct{})
	go func() {
		b.work.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		b.cancel()
		<-done
	}
	b.cancel()
	b.serves.Wait()
}

// mergeValues is a context with the cancellation of base and the values
// of values (the request's user, for the tasks the work records).
func mergeValues(base, values context.Context) context.Context {
	return valuesOf{Context: base, values: values}
}

type valuesOf struct {
	context.Context
	values context.Context
}

func (v valuesOf) Value(key any) any {
	if x := v.Context.Value(key); x != nil {
		return x
	}
	return v.values.Value(key)
}

// Background is the server's Background, or an error saying the
// operation needs one.
func (s *Service) Background(what string) (*Background, error) {
	if s.Config.Background == nil {
		return nil, Invalidf("%s goes on after the answer: only the server runs it", what)
	}
	return s.Config.Background, nil
}
