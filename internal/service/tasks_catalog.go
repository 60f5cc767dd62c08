package service

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/task"
)

// CatalogTasks records long operations as tasks of the catalog
// (internal/task): listed, followed and cancelled from any process on any
// host that shares the catalog, with the user who started them. The
// server's service uses it; a policy run is not recorded twice: the
// engine records it as its task (Config.TaskManager).
type CatalogTasks struct {
	M   *task.Manager
	Log *slog.Logger
}

// taskKinds maps the service's task kinds to the catalog's.
var taskKinds = map[string]string{
	"backup":          catalog.KindBackupVM,
	"backup-disk":     catalog.KindBackupDisk,
	"restore":         catalog.KindRestore,
	"restore-vm":      catalog.KindRestoreVM,
	"files":           catalog.KindRestoreFiles,
	"verify":          catalog.KindVerify,
	"gc":              catalog.KindGC,
	"forget":          catalog.KindForget,
	"copy":            catalog.KindCopy,
	"instant-commit":  catalog.KindInstant,
	"repair-undelete": catalog.KindRepair,
}

// progressEvery is how often a task's meter is sampled (the manager
// merges samples closer than its own interval).
const progressEvery = time.Second

// Start implements Tasks.
func (c CatalogTasks) Start(ctx context.Context, kind, object string) (context.Context, Task) {
	log := c.Log
	if log == nil {
		log = slog.Default()
	}
	if kind == "backup-policy" {
		// The engine records the run as its task.
		return LocalTasks{Logger: log}.Start(ctx, kind, object)
	}
	k, ok := taskKinds[kind]
	if !ok && strings.HasPrefix(kind, "repair-") {
		k, ok = catalog.KindRepair, true
	}
	if !ok {
		k = kind
	}
	spec := task.Spec{Kind: k, Object: object}
	if rest, ok := strings.CutPrefix(object, auth.RepositoriesPath+"/"); ok {
		spec.Repository = rest
	}
	h, err := c.M.Start(ctx, spec)
	if err != nil {
		// The operation runs all the same; only its record is missing.
		log.Warn("recording the task failed", "kind", k, "err", err)
		return LocalTasks{Logger: log}.Start(ctx, kind, object)
	}
	t := &catalogTask{h: h, log: log.With("task", h.ID(), "kind", k), stop: make(chan struct{})}
	return h.Context(), t
}

type catalogTask struct {
	h    *task.Handle
	log  *slog.Logger
	stop chan struct{}
	poll bool
}

func (t *catalogTask) Log(level slog.Level, msg string, args ...any) {
	fields := map[string]any{}
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok {
			fields[k] = args[i+1]
		}
	}
	lvl := "info"
	switch {
	case level >= slog.LevelError:
		lvl = "error"
	case level >= slog.LevelWarn:
		lvl = "warn"
	}
	t.h.Log(lvl, msg, fields)
	t.log.Log(t.h.Context(), level, msg, args...)
}

// Progress samples the meter until the task ends or another meter
// replaces it.
func (t *catalogTask) Progress(m Meter) {
	if t.poll {
		t.stop <- struct{}{}
	}
	t.poll = true
	go func() {
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			p := catalog.Progress{}
			if m.Done != nil {
				p.BytesDone = m.Done()
			}
			if m.Total != nil {
				p.BytesTotal = m.Total()
			}
			t.h.Progress(p)
			select {
			case <-t.stop:
				return
			case <-tick.C:
			}
		}
	}()
}

func (t *catalogTask) Finish(err error) {
	if t.poll {
		t.stop <- struct{}{}
	}
	if _, ferr := t.h.End(context.WithoutCancel(t.h.Context()), err); ferr != nil {
		t.log.Warn("recording the end of the task failed", "err", ferr)
	}
}
