package servercmd

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/server"
	"github.com/coffer-backup/coffer/internal/service"
)

// serviceManager is the server's last component: once every other one
// has started it tells systemd the server is ready (Type=notify), and
// until the server drains, SIGHUP reads the configuration file again
// (systemctl reload coffer): its connections, repositories, limits,
// policies, notifications and the other sections configuration objects
// also set take effect as after a change through the API; a file they
// refuse is logged and the one in effect stays.
func (a *app) serviceManager(svc *service.Service, url string) server.Component {
	hangups := make(chan os.Signal, 1)
	done := make(chan struct{})
	return server.Component{Name: "service-manager",
		Start: func(ctx context.Context) (<-chan error, error) {
			signal.Notify(hangups, syscall.SIGHUP)
			go func() {
				defer close(done)
				for range hangups {
					a.reloadFile(context.WithoutCancel(ctx), svc, url)
				}
			}()
			a.NotifyServiceManager("READY=1\nSTATUS=serving " + url)
			return nil, nil
		},
		Drain: func(context.Context) error {
			a.NotifyServiceManager("STOPPING=1\nSTATUS=draining")
			signal.Stop(hangups)
			close(hangups)
			<-done
			return nil
		},
	}
}

// reloadFile applies the configuration file as it is now.
func (a *app) reloadFile(ctx context.Context, svc *service.Service, url string) {
	// MONOTONIC_USEC lets systemd (253 and later) match the reload it
	// asked for with this one.
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	a.NotifyServiceManager(fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d\nSTATUS=reloading the configuration file", ts.Nano()/int64(time.Microsecond)))
	defer a.NotifyServiceManager("READY=1\nSTATUS=serving " + url)
	f, err := a.ReadFileAgain()
	if err == nil {
		err = svc.ReloadFile(ctx, f)
	}
	if err != nil {
		a.Log.Error("SIGHUP: the configuration file is refused: keeping the configuration in effect", "err", err)
		return
	}
	a.Log.Info("SIGHUP: configuration file read again; its server:, maintenance: and top-level keys apply at the next start",
		"file", f.Path)
}
