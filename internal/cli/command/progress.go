package command

import (
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// progressBar shows a live bar on a terminal (never with --json, --quiet or
// when stderr is not a terminal). done and total are polled counters;
// detail adds a short text such as the amount stored.
type progressBar struct {
	p    *mpb.Progress
	bar  *mpb.Bar
	stop chan struct{}
	done chan struct{}
}

func (a *App) startProgress(label string, total, done func() int64, detail func() string) *progressBar {
	if !a.Interactive() {
		return nil
	}
	p := mpb.New(mpb.WithOutput(a.Stderr), mpb.WithRefreshRate(150*time.Millisecond), mpb.WithWidth(40))
	bar := p.AddBar(max(total(), 1),
		mpb.PrependDecorators(decor.Name(label+" ", decor.WCSyncSpaceR), decor.CountersKibiByte("% .1f / % .1f")),
		mpb.AppendDecorators(decor.Percentage(decor.WCSyncSpace), decor.Name(" "), decor.AverageSpeed(decor.SizeB1024(0), "% .1f", decor.WCSyncSpace),
			decor.Any(func(decor.Statistics) string { return " " + detail() })),
	)
	pb := &progressBar{p: p, bar: bar, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(pb.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			bar.SetTotal(max(total(), 1), false)
			bar.SetCurrent(done())
			select {
			case <-pb.stop:
				bar.SetTotal(max(total(), 1), true)
				return
			case <-t.C:
			}
		}
	}()
	return pb
}

// finish stops the bar (nil-safe).
func (pb *progressBar) finish() {
	if pb == nil {
		return
	}
	close(pb.stop)
	<-pb.done
	pb.bar.Abort(false)
	pb.p.Wait()
}
