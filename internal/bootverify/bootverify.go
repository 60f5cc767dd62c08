package bootverify

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore/nbdexport"
)

// Options adjust a verification.
type Options struct {
	StateDir string
	// Timeout bounds the whole ladder of one VM (default 5 minutes).
	Timeout time.Duration
	// Marker is the console regex of step 3 (default "login:").
	Marker string
	// MaxResets is how many guest resets make a boot loop (default 3; a
	// panicking guest rebooting at once resets twice or more per boot).
	MaxResets int
	Probes    []Probe
	// ProbeTimeout bounds each probe's retries (default 30 s).
	ProbeTimeout time.Duration
	// Reference is the VM's last verified screenshot (PNG) and
	// ReferencePoint the point it showed: a screen that differs from it
	// by more than ReviewThreshold is flagged for review (Result.Review).
	Reference      []byte
	ReferencePoint string
	Log            *slog.Logger
}

// DefaultMarker is the console marker of step 3 unless a VM sets its own.
const DefaultMarker = "login:"

func (o *Options) defaults() error {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Marker == "" {
		o.Marker = DefaultMarker
	}
	if o.MaxResets <= 0 {
		o.MaxResets = 3
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.StateDir == "" {
		return errors.New("boot verification needs a state directory")
	}
	return nil
}

// Run verifies that snap boots. The error is for a verification that
// could not be attempted (not a QEMU point, bad options, no room in the
// state directory); a VM that does not boot is a Result that failed.
func Run(ctx context.Context, r *repo.Repository, snap *repo.Point, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	marker, err := regexp.Compile(o.Marker)
	if err != nil {
		return nil, fmt.Errorf("console marker %q is not a regular expression: %w", o.Marker, err)
	}
	if len(snap.VMConfig) == 0 {
		return nil, fmt.Errorf("backup point %s records no VM configuration (a backup of disks alone): boot verification boots the points of VMs: %w",
			snap.ID.Short(), hypervisor.ErrUnsupported)
	}
	var cfg hypervisor.VMConfig
	if err := json.Unmarshal(snap.VMConfig, &cfg); err != nil {
		return nil, fmt.Errorf("backup point %s: its recorded VM configuration does not read: %w", snap.ID.Short(), err)
	}
	var m machine
	switch cfg.Kind {
	case "qemu":
		if m, err = qemuMachine(cfg); err != nil {
			return nil, err
		}
	case "vsphere":
		h, err := probeHost(ctx)
		if err != nil {
			return nil, err
		}
		vm, err := planVSphere(cfg, h, o.Probes)
		var cv *CannotVerifyError
		if errors.As(err, &cv) {
			return unverifiable(snap, cfg, cv), nil
		}
		if err != nil {
			return nil, err
		}
		m = machine{args: vm.args, nic: vm.nic, evidence: vm.evidence,
			noAgent: "a vSphere guest's agent is VMware Tools, which QEMU cannot reach"}
	case "libvirt":
		if m, err = libvirtMachineOf(ctx, snap, cfg, o.Probes); err != nil {
			var cv *CannotVerifyError
			if errors.As(err, &cv) {
				return unverifiable(snap, cfg, cv), nil
			}
			return nil, err
		}
	default:
		return nil, fmt.Errorf("backup point %s was taken from a %q VM: boot verification runs QEMU, libvirt and vSphere points under QEMU "+
			"from their recorded configuration: %w", snap.ID.Short(), cfg.Kind, hypervisor.ErrUnsupported)
	}
	v := &run{o: o, m: m, marker: marker, res: &Result{PointID: snap.ID.String(), VM: cfg.Name, Started: time.Now().UTC()}}
	runID := snap.ID.Short() + "-" + id.Random().String()[:8]
	v.j = &journal{path: filepath.Join(Root(o.StateDir), runID+".json"), journalState: journalState{
		CofferPID: os.Getpid(), Point: snap.ID.String(), VM: cfg.Name, Dir: filepath.Join(Root(o.StateDir), runID), Created: v.res.Started}}
	// Journal first: from here on a killed coffer leaves nothing Cleanup
	// does not know of.
	if err := v.j.save(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(v.j.Dir, 0o700); err != nil {
		_, _ = v.j.undo(context.WithoutCancel(ctx)) // best effort after the error returned
		return nil, err
	}
	defer v.cleanup(context.WithoutCancel(ctx))
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	v.ladder(ctx, r, snap, cfg)
	v.res.Duration = time.Since(v.res.Started)
	v.res.settle()
	return v.res, nil
}

// run is one verification in progress.
type run struct {
	o      Options
	m      machine
	marker *regexp.Regexp
	res    *Result
	j      *journal

	stopServe func()
	served    chan error
	con       *console
	qmp       *qmp.Client
	qemuPID   int
	agentSock string
	forward   map[int]int // guest port -> host port
	events    *watcher
}

// step records one rung.
func (v *run) step(n int, began time.Time, err error, detail string, evidence map[string]string) {
	s := Step{Number: n, Name: stepNames[n], Status: Passed, Duration: time.Since(began), Detail: detail, Evidence: evidence}
	if err != nil {
		s.Status, s.Detail = Failed, err.Error()
	}
	v.res.Steps = append(v.res.Steps, s)
	v.o.Log.Info("boot verification step", "point", v.res.PointID, "step", n, "name", s.Name, "status", s.Status, "detail", s.Detail)
}

func (v *run) skip(n int, why string) {
	v.res.Steps = append(v.res.Steps, Step{Number: n, Name: stepNames[n], Status: Skipped, Detail: why})
}

// ladder runs the steps; a failed step skips the ones after it, except
// the screenshot, which is evidence of what the VM shows.
func (v *run) ladder(ctx context.Context, r *repo.Repository, snap *repo.Point, cfg hypervisor.VMConfig) {
	began := time.Now()
	ev, err := v.start(ctx, r, snap, cfg)
	v.step(StepStart, began, err, "QEMU started the VM from the backup point, isolated", ev)
	if err != nil {
		for n := StepNoPanic; n <= StepScreenshot; n++ {
			v.skip(n, "the VM did not start")
		}
		return
	}
	failed := v.boot(ctx)
	if !failed {
		failed = v.agent(ctx)
	} else {
		v.skip(StepAgent, "an earlier step failed")
	}
	if !failed {
		v.probes(ctx)
	} else {
		v.skip(StepProbes, "an earlier step failed")
	}
	// A panic after the marker still fails step 2.
	if s := v.res.Step(StepNoPanic); s != nil && s.Status == Passed {
		if why := v.events.failure(); why != "" {
			s.Status, s.Detail = Failed, why+" (after the console marker)"
		}
	}
	v.screenshot(ctx)
}

// start serves the point's disks, creates the overlays and starts QEMU
// paused, then continues it with the events subscribed.
func (v *run) start(ctx context.Context, r *repo.Repository, snap *repo.Point, cfg hypervisor.VMConfig) (map[string]string, error) {
	dir := v.j.Dir
	exports, names, err := nbdexport.Exports(ctx, r, snap)
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "nbd.sock")
	l, err := nbdexport.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	serveCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	v.stopServe, v.served = stop, make(chan error, 1)
	go func() { v.served <- nbdexport.Serve(serveCtx, l, exports, names, v.o.Log) }()

	spec := qemu.LaunchSpec{Dir: dir, Name: "coffer-bootverify-" + cfg.Name, UUID: cfg.UUID, Disks: map[string]qemu.LaunchDisk{}}
	for _, d := range snap.Disks {
		if d.Kind == hypervisor.KindMemory {
			continue // a memory state is no disk to boot from
		}
		overlay := filepath.Join(dir, d.Key+".overlay.qcow2")
		if err := qemu.CreateNBDOverlay(ctx, overlay, sock, d.Key, d.Size, 0); err != nil {
			return nil, err
		}
		spec.Disks[d.Key] = qemu.LaunchDisk{Path: overlay, Format: "qcow2"}
	}
	args, err := v.m.args(spec)
	if err != nil {
		return nil, err
	}
	var guestPorts []int
	for _, p := range v.o.Probes {
		if p.Kind != ProbeExec {
			guestPorts = append(guestPorts, p.Port)
		}
	}
	var pid int
	v.forward, err = qemu.LaunchForwarded(guestPorts, qemu.FreePort, func(forward map[int]int) error {
		// A console of its own for each try: a QEMU that failed may have
		// connected to the last one, which takes one connection.
		if v.con != nil {
			v.con.close()
		}
		var err error
		if v.con, err = listenConsole(filepath.Join(dir, "console.sock")); err != nil {
			return err
		}
		iso := qemu.IsolateArgs(args, qemu.IsolateSpec{Forward: forward, Console: filepath.Join(dir, "console.sock"),
			ConsoleLog: spec.ConsolePath(), NIC: v.m.nic})
		v.agentSock = iso.AgentSocket
		pid, err = qemu.Launch(ctx, iso.Args, spec)
		return err
	})
	if err != nil {
		return nil, err
	}
	v.qemuPID = pid
	if v.qmp, err = qmp.Dial(ctx, spec.QMPPath()); err != nil {
		return nil, err
	}
	v.events = watch(v.qmp.Subscribe(), v.o.MaxResets)
	if err := v.qmp.Execute(ctx, "cont", nil, nil); err != nil {
		return nil, err
	}
	ev := map[string]string{"qemu_pid": fmt.Sprint(pid), "qemu_version": v.qmp.Version()}
	for k, val := range v.m.evidence {
		ev[k] = val
	}
	if len(v.forward) == 0 {
		ev["network"] = "none"
	} else {
		ev["network"] = fmt.Sprintf("user-mode, restricted; forwarded guest:host ports %v", v.forward)
	}
	return ev, nil
}

// boot runs steps 2 and 3: until the console marker appears, watch for a
// panic, a boot loop or the VM stopping.
func (v *run) boot(ctx context.Context) (failed bool) {
	began := time.Now()
	for {
		m, changed := v.con.match(v.marker)
		if m != "" {
			v.step(StepNoPanic, began, nil, fmt.Sprintf("%d reset(s) before the marker", v.events.resetCount()), nil)
			v.step(StepConsole, began, nil, "the console showed the marker", map[string]string{"match": m, "marker": v.marker.String()})
			return false
		}
		if why := v.events.failure(); why != "" {
			v.step(StepNoPanic, began, errors.New(why), "", map[string]string{"resets": fmt.Sprint(v.events.resetCount())})
			v.skip(StepConsole, "an earlier step failed")
			return true
		}
		select {
		case <-changed:
		case <-v.events.changed():
		case <-ctx.Done():
			v.step(StepNoPanic, began, nil, fmt.Sprintf("%d reset(s)", v.events.resetCount()), nil)
			v.step(StepConsole, began, fmt.Errorf("no console output matched %q before the timeout (%s)", v.marker, v.o.Timeout), "",
				map[string]string{"console_tail": v.con.tail(512)})
			return true
		}
	}
}

// agent runs step 4 when the VM has a guest agent channel.
func (v *run) agent(ctx context.Context) (failed bool) {
	if v.agentSock == "" {
		v.skip(StepAgent, cmp.Or(v.m.noAgent, "the VM has no guest agent channel"))
		return false
	}
	began := time.Now()
	ga, err := v.dialAgent(ctx)
	if err != nil {
		v.step(StepAgent, began, err, "", nil)
		return true
	}
	defer ga.Close()
	ev := map[string]string{}
	var info struct {
		Name    string `json:"pretty-name"`
		Kernel  string `json:"kernel-release"`
		Machine string `json:"machine"`
	}
	if err := ga.Execute(ctx, "guest-get-osinfo", nil, &info); err == nil {
		ev["os"], ev["kernel"], ev["machine"] = info.Name, info.Kernel, info.Machine
	}
	v.step(StepAgent, began, nil, "guest-ping answered", ev)
	return false
}

// dialAgent connects to the guest agent and pings it. The agent may start
// after the marker: each attempt is bounded, and they go on until ctx ends.
func (v *run) dialAgent(ctx context.Context) (*qmp.GuestAgent, error) {
	var last error
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ga, err := qmp.DialGuestAgent(actx, v.agentSock)
		if err == nil {
			err = ga.Execute(actx, "guest-ping", nil, nil)
			if err == nil {
				cancel()
				return ga, nil
			}
			ga.Close()
		}
		cancel()
		last = err
	}
	return nil, fmt.Errorf("the guest agent did not answer: %v", last)
}

// probes runs step 5: every probe is retried until it passes or its time
// is up (a service may start after the login prompt).
func (v *run) probes(ctx context.Context) {
	if len(v.o.Probes) == 0 {
		v.skip(StepProbes, "no probe configured")
		return
	}
	began := time.Now()
	ev := map[string]string{}
	var errs []error
	agent := func(ctx context.Context) (*qmp.GuestAgent, error) {
		if v.agentSock == "" {
			return nil, errors.New("the VM has no guest agent channel to run the command through")
		}
		return v.dialAgent(ctx)
	}
	for _, p := range v.o.Probes {
		pctx, cancel := context.WithTimeout(ctx, v.o.ProbeTimeout)
		got, err := retry(pctx, func(ctx context.Context) (string, error) { return probeOnce(ctx, p, v.forward[p.Port], agent) })
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			ev[p.String()] = "failed: " + err.Error()
		} else {
			ev[p.String()] = got
		}
	}
	v.step(StepProbes, began, errors.Join(errs...), fmt.Sprintf("%d probe(s) passed", len(v.o.Probes)), ev)
}

// retry runs f until it passes or ctx ends; the error of the last
// attempt is returned.
func retry(ctx context.Context, f func(context.Context) (string, error)) (string, error) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := f(ctx)
		if err == nil {
			return out, nil
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		if ctx.Err() != nil { // an attempt on a dead context would hide this error
			return out, fmt.Errorf("%w (retried until the probe timeout)", err)
		}
	}
}

// screenSettle is how long a blank screen is looked at again before the
// step fails, every screenRetry.
const (
	screenSettle = 5 * time.Second
	screenRetry  = 250 * time.Millisecond
)

// screenshot runs step 6: a blank or single-colour screen fails.
func (v *run) screenshot(ctx context.Context) {
	began := time.Now()
	v.res.ConsoleTail = v.con.tail(consoleTailBytes)
	// The ladder's own deadline may be gone: the screenshot is evidence of
	// why, so it gets a moment of its own.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	path := filepath.Join(v.j.Dir, "screen.png")
	// A screen may be blank for a moment although the guest is up: a
	// console's cursor blinks, and a framebuffer console takes over (and
	// clears the screen) after the first text, from a work queue of the
	// guest's kernel, so the login prompt may reach the serial port before
	// the screen. A blank screen is looked at again for a few seconds.
	settle := time.Now().Add(screenSettle)
	var b []byte
	var bd image.Rectangle
	var colours int
	var err error
	for {
		if err = v.qmp.Execute(sctx, "screendump", map[string]any{"filename": path, "format": "png"}, nil); err == nil {
			b, err = os.ReadFile(path)
		}
		if err != nil {
			v.step(StepScreenshot, began, fmt.Errorf("no screenshot: %w", err), "", nil)
			return
		}
		// An image that does not decode is looked at again too: a CI run
		// under load read a PNG that ended early (unexpected EOF).
		bd, colours, err = screenColours(b, 2)
		if (err == nil && colours >= 2) || time.Now().After(settle) {
			break
		}
		select {
		case <-sctx.Done():
		case <-time.After(screenRetry):
		}
		if sctx.Err() != nil {
			break
		}
	}
	v.res.Screenshot = b
	ev := map[string]string{"size": fmt.Sprintf("%dx%d", bd.Dx(), bd.Dy()), "png_bytes": fmt.Sprint(len(b))}
	if err == nil && colours < 2 {
		err = fmt.Errorf("the screen is blank (a single colour), and stayed so for %s", time.Since(settle.Add(-screenSettle)).Round(100*time.Millisecond))
	}
	if err == nil && v.o.Reference != nil {
		v.compare(b, ev)
	}
	v.step(StepScreenshot, began, err, "the screen shows something", ev)
}

// compare flags a screen far from the VM's last verified one for a
// person to look at; it never fails the step, since a screen may change
// for good reasons (an update, a new login banner).
func (v *run) compare(shot []byte, ev map[string]string) {
	d, err := screenDifference(shot, v.o.Reference)
	if err != nil {
		ev["compared"] = err.Error()
		return
	}
	ev["changed_vs_last_verified"] = fmt.Sprintf("%.0f%%", 100*d)
	if d > ReviewThreshold {
		v.res.Review = fmt.Sprintf("the screen differs by %.0f%% from the last verified screenshot (point %s): look at both",
			100*d, shortID(v.o.ReferencePoint))
	}
}

// cleanup stops QEMU, the export and removes the run directory and its
// journal, whatever happened.
func (v *run) cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if v.qmp != nil {
		// QEMU removes its pid file as it starts to exit, before it is
		// gone: read it first, and wait for that process after quit, or
		// the undo below finds no pid file and returns while QEMU lives.
		pid := readPID(v.j.pidFile())
		_ = v.qmp.Execute(ctx, "quit", nil, nil)
		v.qmp.Close()
		if pid > 0 && ownsProcess(pid, v.j.Dir) {
			_ = killAndWait(ctx, pid)
		}
	}
	if v.con != nil {
		v.con.close()
	}
	if v.stopServe != nil {
		v.stopServe()
		<-v.served
	}
	if _, err := v.j.undo(ctx); err != nil {
		v.o.Log.Warn("boot verification cleanup failed; the next start retries it", "dir", v.j.Dir, "err", err)
	}
}
