package service

import (
	"context"
	"sync"
)

// A face that starts a long operation and wants to show its task while it
// runs (the console sends the browser to the task's live page rather than
// holding the request until a restore ends) asks for the task's ID with
// WithTaskStarted: the service calls back once the task is recorded, in
// the goroutine that runs the operation. Operations that refuse their
// input before a task starts never call it, so the face tells "refused"
// (the call returns with no task) from "running" (the callback came).

type taskStartedKey struct{}

// WithTaskStarted returns ctx asking for fn to be called with the ID of
// the first catalog task an operation under ctx records.
func WithTaskStarted(ctx context.Context, fn func(id int64)) context.Context {
	var once sync.Once
	return context.WithValue(ctx, taskStartedKey{}, func(id int64) { once.Do(func() { fn(id) }) })
}

// noteTaskStarted tells the face that asked which task began.
func noteTaskStarted(ctx context.Context, id int64) {
	if fn, ok := ctx.Value(taskStartedKey{}).(func(int64)); ok && fn != nil {
		fn(id)
	}
}
