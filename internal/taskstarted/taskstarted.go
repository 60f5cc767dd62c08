// Package taskstarted lets a face that starts a long operation learn its
// task's ID while the operation runs: the console sends the browser to
// the task's live page rather than holding the request until a restore
// ends. The face asks with With on the context it calls the API with (in
// process); the service calls Note once the task is recorded, in the
// goroutine that runs the operation. Operations that refuse their input
// before a task starts never call it, so the face tells "refused" (the
// call returns with no task) from "running" (the callback came).
//
// It is its own package so that the console, a client of the API only,
// need not import the service for it.
package taskstarted

import (
	"context"
	"sync"
)

type key struct{}

// With returns ctx asking for fn to be called with the ID of the first
// catalog task an operation under ctx records.
func With(ctx context.Context, fn func(id int64)) context.Context {
	var once sync.Once
	return context.WithValue(ctx, key{}, func(id int64) { once.Do(func() { fn(id) }) })
}

// Note tells the face that asked which task began.
func Note(ctx context.Context, id int64) {
	if fn, ok := ctx.Value(key{}).(func(int64)); ok && fn != nil {
		fn(id)
	}
}
