package vsphere

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

const guestUser, guestPass = "dbadmin", "guest-s3cret"

// simTools plays VMware Tools' process manager in place of vcsim's, which
// needs docker (its VMs are containers) and crashes its own request
// handler without it. It runs the program on this machine the way Tools
// runs it on a Linux guest: `/bin/sh -c '<program>' <arguments>`. The SOAP
// calls, the login check, the exit codes, the polling and the
// termination are real; the guest is not.
type simTools struct {
	*simulator.GuestProcessManager
	mu         sync.Mutex
	procs      map[int64]*simProc
	terminated []int64
}

type simProc struct {
	cmd  *exec.Cmd
	done bool
	code int32
	end  time.Time
}

func installSimTools(t testing.TB, s *sim) *simTools {
	ref := *s.client.ServiceContent.GuestOperationsManager
	gom := s.model.Map().Get(ref).(*simulator.GuestOperationsManager)
	pm := s.model.Map().Get(*gom.ProcessManager).(*simulator.GuestProcessManager)
	st := &simTools{GuestProcessManager: pm, procs: map[int64]*simProc{}}
	s.model.Map().Put(st)
	t.Cleanup(func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		for _, p := range st.procs {
			if !p.done {
				p.cmd.Process.Kill()
			}
		}
	})
	return st
}

func (m *simTools) StartProgramInGuest(ctx *simulator.Context, req *types.StartProgramInGuest) soap.HasFault {
	body := new(methods.StartProgramInGuestBody)
	if a, ok := req.Auth.(*types.NamePasswordAuthentication); !ok || a.Username != guestUser || a.Password != guestPass {
		body.Fault_ = simulator.Fault("", new(types.InvalidGuestLogin))
		return body
	}
	spec := req.Spec.(*types.GuestProgramSpec)
	cmd := exec.Command("/bin/sh", "-c", "'"+spec.ProgramPath+"' "+spec.Arguments)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		body.Fault_ = simulator.Fault(err.Error(), new(types.FileNotFound))
		return body
	}
	p := &simProc{cmd: cmd}
	pid := int64(cmd.Process.Pid)
	m.mu.Lock()
	m.procs[pid] = p
	m.mu.Unlock()
	go func() {
		cmd.Wait()
		m.mu.Lock()
		p.done, p.code, p.end = true, int32(cmd.ProcessState.ExitCode()), time.Now()
		m.mu.Unlock()
	}()
	body.Res = &types.StartProgramInGuestResponse{Returnval: pid}
	return body
}

func (m *simTools) ListProcessesInGuest(ctx *simulator.Context, req *types.ListProcessesInGuest) soap.HasFault {
	body := &methods.ListProcessesInGuestBody{Res: new(types.ListProcessesInGuestResponse)}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, pid := range req.Pids {
		if p, ok := m.procs[pid]; ok {
			info := types.GuestProcessInfo{Pid: pid, Owner: guestUser, ExitCode: p.code}
			if p.done {
				info.EndTime = types.NewTime(p.end)
			}
			body.Res.Returnval = append(body.Res.Returnval, info)
		}
	}
	return body
}

func (m *simTools) TerminateProcessInGuest(ctx *simulator.Context, req *types.TerminateProcessInGuest) soap.HasFault {
	body := new(methods.TerminateProcessInGuestBody)
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.procs[req.Pid]
	if !ok {
		body.Fault_ = simulator.Fault("", &types.GuestProcessNotFound{Pid: req.Pid})
		return body
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	m.terminated = append(m.terminated, req.Pid)
	body.Res = new(types.TerminateProcessInGuestResponse)
	return body
}

func guestCreds(t *testing.T, pass string) func(*Config) {
	pw := filepath.Join(t.TempDir(), "guest-pw")
	if err := os.WriteFile(pw, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(c *Config) { c.GuestUser, c.GuestPasswordFile = guestUser, pw }
}

// TestGuestHooksThroughVMwareTools: a pre hook run through guest
// operations writes a marker into the VM's disk that the restored point
// holds; the point records its hooks as ok. A post command that fails is
// recorded with its exit status; one past its timeout is terminated.
func TestGuestHooksThroughVMwareTools(t *testing.T) {
	l := startHostLab(t, 1<<20)
	l.s.setTools(l.vm, true)
	tools := installSimTools(t, l.s)
	c := l.connect(t, guestCreds(t, guestPass))
	r := newRepo(t)
	marker := "PRE-HOOK it's quoted"
	write := func(s string, off int) []string {
		return []string{"/bin/sh", "-c", fmt.Sprintf("printf '%%s' \"$1\" | dd of=%s bs=1 seek=%d conv=notrunc 2>/dev/null", l.flatOnDisk, off), "hook", s}
	}
	hooks := []backup.Hook{{Name: "db", InGuest: true, Pre: write(marker, 4096), Post: []string{"/bin/sh", "-c", "exit 3"}}}
	snap := backupWithHooks(t, l, r, c, hooks)
	got := restoreBytes(t, r, snap)
	if !bytes.Contains(got[4096:4096+len(marker)], []byte(marker)) {
		t.Fatalf("the restored disk lacks the pre hook's marker: %q", got[4096:4096+len(marker)])
	}
	if snap.Hooks != backup.HooksPostFailed || !strings.Contains(strings.Join(snap.Warnings, ";"), "exited with status 3") {
		t.Fatalf("hooks %q, warnings %v", snap.Hooks, snap.Warnings)
	}

	slow := []backup.Hook{{Name: "slow", InGuest: true, Pre: []string{"/bin/sleep", "30"}, Timeout: 300 * time.Millisecond}}
	snap = backupWithHooks(t, l, r, c, slow)
	if snap.Hooks != backup.HooksPreFailed || !strings.Contains(strings.Join(snap.Warnings, ";"), "terminated") {
		t.Fatalf("a hook past its timeout: hooks %q, warnings %v", snap.Hooks, snap.Warnings)
	}
	tools.mu.Lock()
	n := len(tools.terminated)
	tools.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d guest processes terminated, want the slow one", n)
	}
}

func backupWithHooks(t *testing.T, l *hostLab, r *repo.Repository, c *Connector, hooks []backup.Hook) *repo.Point {
	t.Helper()
	ctx := context.Background()
	w, err := r.NewWriter(ctx, "vm")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	snap, err := backup.BackupVM(ctx, w, c, backup.VMRequest{Connection: "vc", VM: l.ref(), Mode: "full",
		SnapshotMode: hypervisor.CrashConsistent, Quiesce: hypervisor.QuiesceFallback, Hooks: hooks}, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestGuestRunRefusals: what stops a guest command, each with the reason
// an operator can act on.
func TestGuestRunRefusals(t *testing.T) {
	l := startHostLab(t, 1<<20)
	ctx := context.Background()
	vm := l.ref()
	argv := []string{"/bin/true"}

	if _, err := l.connect(t, nil).GuestRun(ctx, vm, argv); err == nil || !strings.Contains(err.Error(), "guest-user") {
		t.Fatalf("without guest credentials: %v", err)
	}
	c := l.connect(t, guestCreds(t, "wrong"))
	l.s.setTools(l.vm, false)
	if _, err := c.GuestRun(ctx, vm, argv); err == nil || !strings.Contains(err.Error(), "VMware Tools is not running") {
		t.Fatalf("without Tools: %v", err)
	}
	l.s.setTools(l.vm, true)
	// vcsim's own StartProgramInGuest: the fault a guest without usable
	// Tools gives, injected before vcsim's handler (which needs docker).
	l.s.model.Service.AddFaultRule(&simulator.FaultInjectionRule{MethodName: "StartProgramInGuest", ObjectType: "*", ObjectName: "*",
		Probability: 1, FaultType: simulator.FaultTypeCustom, Fault: new(types.GuestOperationsUnavailable), MaxCount: 1, Enabled: true})
	if _, err := c.GuestRun(ctx, vm, argv); err == nil || !strings.Contains(err.Error(), "guest operations are not available") {
		t.Fatalf("guest operations unavailable: %v", err)
	}
	l.s.model.Service.ClearFaultRules()
	installSimTools(t, l.s)
	if _, err := c.GuestRun(ctx, vm, argv); err == nil || !strings.Contains(err.Error(), "refused the login of "+guestUser) {
		t.Fatalf("a wrong guest password: %v", err)
	}
}
