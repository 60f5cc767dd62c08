package backupops

import (
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"
	"github.com/coffer-backup/coffer/internal/service/policyfind"

	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/engine/attempt"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/taskstarted"
)

// backupVMInput is a VM to back up now and how: a running QEMU VM
// reached through a QMP monitor of coffer's own (Socket), or a VM of a
// configured connection of any kind (Connection and VM, its name or ID).
type backupVMInput struct {
	Socket         string
	Connection, VM string
	// Mode is full, incremental or differential ("": incremental; the
	// first backup is full whatever it says).
	Mode string
	// SnapshotMode is the VM snapshot mode asked for ("": crash-
	// consistent); Quiesce says what happens without a guest agent
	// ("": fallback).
	SnapshotMode hypervisor.SnapshotMode
	Quiesce      hypervisor.QuiescePolicy
	Tags         map[string]string
	LockedUntil  time.Time
	// NBDConnections per disk (0: 4; a QEMU monitor only).
	NBDConnections int
	// ChangeCheckSpans is how many spans of each disk an incremental
	// reads to check change tracking (0: the default, 6; -1: off).
	ChangeCheckSpans int
	// NoHooks skips the hooks of the policies that protect the VM
	// (policyHooks), which run by default.
	NoHooks bool
}

// adHocChain is the backup chain of backups taken now rather than by a
// policy, into the repository named repo: a chain of its own, named like
// a policy's (name@repository), so that they never consume a policy's
// change tracking, and an administrator reading `virsh checkpoint-list`
// or a QEMU disk's bitmaps sees coffer-backup_vm_<repository>.
func adHocChain(repo string) string { return "backup-vm@" + repo }

// BackupVM backs up every disk of a VM at one instant into the
// repository and records the point in the catalog. It runs as a job of
// its own (kind backup-vm) through the engine's per-VM path, the one
// policies' runs take: the configured limits, timeouts and retries
// apply, and leftovers of a killed coffer on the VM's connection are
// removed first. The VM is one of a configured connection (Connection
// and VM, its name or ID).
func (s Ops) BackupVM(ctx context.Context, in *api.BackupVMInput) (*api.BackupPoint, error) {
	// A server of a fleet that does not lead forwards it to the leader,
	// whose engine runs it on the workers.
	p, forwarded, resumes, err := onLeader[*api.BackupPoint](ctx, s, "backup-vm", in)
	if forwarded {
		return p, err
	}
	return s.backupVM(job.WithResumes(ctx, resumes), backupVMOf("", in))
}

// BackupQMP is BackupVM of a running QEMU VM reached through a QMP monitor
// of coffer's own at socket, read over nbdConnections NBD connections per
// disk (0: 4): a socket is a file of this host, which no request names,
// so only the command line backs a VM up this way.
func (s Ops) BackupQMP(ctx context.Context, socket string, nbdConnections int, in *api.BackupVMInput) (*api.BackupPoint, error) {
	b := backupVMOf(socket, in)
	b.NBDConnections = nbdConnections
	return s.backupVM(ctx, b)
}

// backupVMOf reads a backup-vm input (a request says strings where the
// hypervisor package has its types).
func backupVMOf(socket string, in *api.BackupVMInput) backupVMInput {
	b := in.Body
	return backupVMInput{Socket: socket, Connection: in.Connection, VM: in.VM, Mode: b.Mode,
		SnapshotMode: hypervisor.SnapshotMode(b.SnapshotMode), Quiesce: hypervisor.QuiescePolicy(b.Quiesce), Tags: b.Tags,
		LockedUntil: b.LockedUntil, ChangeCheckSpans: b.ChangeCheckSpans, NoHooks: b.NoHooks}
}

func (s Ops) backupVM(ctx context.Context, in backupVMInput) (*api.BackupPoint, error) {
	if err := in.check(); err != nil {
		return nil, err
	}
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, err
	}
	conns, connName, err := s.backupConnector(ctx, cfg, in)
	if err != nil {
		return nil, err
	}
	defer conns.Close()
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	repoName := s.RepoName(s.Config.Repository.Location)
	object := in.Socket
	if in.Connection != "" {
		object = in.Connection + "/" + in.VM
	}
	ctx, t := s.Config.Display.Start(ctx, service.KindBackupVMJob, object)
	p, err := s.backupVMJob(ctx, t, cfg, cat, conns, engine.VMBackup{Connection: connName, Mode: in.Mode,
		Settings: policy.Policy{Connection: connName, Snapshot: string(in.SnapshotMode), Quiesce: string(in.Quiesce),
			Tags: in.Tags, ChangeCheck: in.ChangeCheckSpans},
		Chain: adHocChain(repoName), RetainUntil: in.LockedUntil, Object: "/repositories/" + repoName, Repository: repoName}, in)
	t.Finish(err)
	return p, err
}

// check refuses what cannot be backed up as asked before anything is
// opened, and fills in the defaults.
func (in *backupVMInput) check() error {
	in.Mode = cmp.Or(in.Mode, "incremental")
	in.SnapshotMode = hypervisor.SnapshotMode(cmp.Or(string(in.SnapshotMode), string(hypervisor.CrashConsistent)))
	in.Quiesce = hypervisor.QuiescePolicy(cmp.Or(string(in.Quiesce), string(hypervisor.QuiesceFallback)))
	switch in.Mode {
	case "full", "incremental", "differential":
	default:
		return service.Invalidf("--mode must be full, incremental or differential, not %q", in.Mode)
	}
	switch in.SnapshotMode {
	case hypervisor.CrashConsistent, hypervisor.Quiesced, hypervisor.Suspend, hypervisor.AsIs, hypervisor.WithMemory:
	default:
		return service.Invalidf("unknown --snapshot-mode %q: crash-consistent, quiesced, with-memory, suspend or as-is", in.SnapshotMode)
	}
	if in.Quiesce != hypervisor.QuiesceFallback && in.Quiesce != hypervisor.QuiesceRequired {
		return service.Invalidf("--quiesce must be fallback or required, not %q", in.Quiesce)
	}
	switch {
	case in.Socket != "" && in.Connection != "":
		return service.Invalidf("name either a QMP socket or --connection %s and a VM, not both", in.Connection)
	case in.Connection != "" && in.VM == "":
		return service.Invalidf("--connection %s needs the VM to back up, by name or ID: coffer backup vm --connection %s VM (`coffer vms` lists them)",
			in.Connection, in.Connection)
	case in.Socket == "" && in.Connection == "":
		return service.Invalidf("name the VM to back up: a QMP socket (coffer backup vm /run/coffer/vm.qmp) or a connection and a VM (coffer backup vm --connection NAME VM)")
	case in.NBDConnections < 0:
		return service.Invalidf("--nbd-connections must not be negative")
	}
	return nil
}

// backupConnector opens what reaches the VM, under the name its points
// record as their connection: a connector over the one QMP socket
// ("qemu:" and the socket), or the configured connection, whose kind must
// be able to take the snapshot mode asked for.
func (s Ops) backupConnector(ctx context.Context, cfg *policy.Config, in backupVMInput) (*service.Connectors, string, error) {
	if in.Socket != "" {
		conn, err := qemu.New(qemu.Config{Sockets: []string{in.Socket}, StateDir: filepath.Join(s.Config.StateDir, "qemu"),
			Connections: in.NBDConnections, Log: s.Logger()})
		if err != nil {
			return nil, "", err
		}
		name := "qemu:" + in.Socket
		return &service.Connectors{Conns: map[string]hypervisor.Connector{name: conn}, Storage: map[string]hypervisor.StorageSnapshotter{}}, name, nil
	}
	cc, ok := cfg.Connection(in.Connection)
	if !ok {
		var names []string
		for _, c := range cfg.Connections {
			names = append(names, c.Name)
		}
		sort.Strings(names)
		have := "it has none: add one to the connections section (see docs/03-hypervisors.md)"
		if len(names) > 0 {
			have = "it has " + strings.Join(names, ", ")
		}
		return nil, "", api.Errorf(api.NotFound, "no connection named %q in the configuration (%s)", in.Connection, have)
	}
	if why, no := policyfind.KindOf(cc.Kind).Cannot[in.SnapshotMode]; no {
		return nil, "", service.Invalidf("--snapshot-mode %s is not possible on connection %s (%s): %s", in.SnapshotMode, cc.Name, cc.Kind, why)
	}
	if err := s.RefuseElsewhere(ctx, cfg, []string{cc.Name}); err != nil {
		return nil, "", err
	}
	if err := s.AwaitServing(ctx); err != nil {
		return nil, "", err
	}
	if eng := s.EngineServing(); eng != nil {
		// The server's connector: the backup runs in its engine
		// (backupVMJob), under the limits its scheduled runs keep.
		if c, ok := eng.Connector(in.Connection); ok {
			return &service.Connectors{Conns: map[string]hypervisor.Connector{in.Connection: c}, Borrowed: true}, in.Connection, nil
		}
	}
	conns, err := s.OpenConnectors(ctx, cfg, []string{in.Connection})
	if err != nil {
		return nil, "", err
	}
	return conns, in.Connection, nil
}

// backupVMJob finds the VM and runs its backup as a job of the server's
// engine when conns are its (backupConnector), else of an engine over
// conns, whose start removes leftovers of a killed coffer first.
func (s Ops) backupVMJob(ctx context.Context, t service.Job, cfg *policy.Config, cat catalog.Catalog, conns *service.Connectors,
	b engine.VMBackup, in backupVMInput) (*api.BackupPoint, error) {
	var err error
	eng := s.EngineServing()
	if !conns.Borrowed || eng == nil {
		if eng, err = s.NewEngine(ctx, t, cfg, cat, conns); err != nil {
			return nil, err
		}
		defer s.closeEngine(eng)
	}
	if b.VM, err = findVM(ctx, conns.Conns[b.Connection], in); err != nil {
		return nil, err
	}
	if !in.NoHooks {
		b.Settings.Hooks, b.HookPolicies = policyHooks(cfg, b.Connection, b.VM)
		for _, h := range b.Settings.Hooks {
			t.Log(slog.LevelInfo, fmt.Sprintf("hook %s (%s) of the policies protecting %s runs around the snapshot", cmp.Or(h.Name, strings.Join(append(h.Pre, h.Post...), " ")), h.Where, b.VM.Name))
		}
	}
	// A forwarded backup tells its leader's queue its job before any
	// attempt (Started), and carries on the jobs lost leaders ran it as.
	b.Resumes, b.Started = job.ResumesFrom(ctx), func(id int64) { taskstarted.Note(ctx, id) }
	bj, err := eng.StartVM(ctx, b)
	if err != nil {
		return nil, err
	}
	taskstarted.Note(ctx, bj.ID())
	t.Progress(service.Meter{Label: "backup " + b.VM.Name, Done: func() int64 { return bj.Progress().BytesDone }, Total: b.VM.ProvisionedBytes})
	res, werr := bj.Wait()
	if werr != nil {
		t.Log(slog.LevelWarn, fmt.Sprintf("job %d: %v", bj.ID(), werr))
	}
	snap, repoID, err := bj.Point()
	switch {
	case err == nil:
		p := apidoc.PointDoc(repoID, snap)
		return &p, nil
	case res != nil && res.Job.Status == catalog.StatusCancelled:
		return nil, api.Errorf(api.Cancelled, "%w: backup of %s (job %d): %v", context.Canceled, b.VM.Name, bj.ID(), err)
	}
	return nil, fmt.Errorf("backup of %s failed (`coffer job show %d` shows its log): %w", b.VM.Name, bj.ID(), err)
}

// policyHooks are the hooks of every policy on the connection that
// protects vm, each once (attempt.PolicyHooks), and the names of the
// policies that have any. Hooks of policies taken as group: datastore
// are not (their validation refuses hooks).
func policyHooks(cfg *policy.Config, connection string, vm hypervisor.VM) ([]policy.Hook, []string) {
	var protecting []policy.Policy
	var names []string
	for _, p := range cfg.Policies {
		if !slices.Contains(p.ConnectionNames(), connection) || !p.Selects(vm) || len(p.HooksFor(vm.Name)) == 0 {
			continue
		}
		protecting = append(protecting, p)
		names = append(names, p.Name)
	}
	return attempt.PolicyHooks(protecting, vm.Name), names
}

// findVM finds the VM to back up in the connector's inventory: the one VM
// of a QMP socket, or the VM of a connection named (or identified) so.
func findVM(ctx context.Context, conn hypervisor.Connector, in backupVMInput) (hypervisor.VM, error) {
	ctx, cancel := context.WithTimeout(ctx, policy.DefaultInventoryTimeout)
	defer cancel()
	vms, err := conn.Inventory(ctx)
	if err != nil {
		if in.Socket != "" {
			return hypervisor.VM{}, err
		}
		return hypervisor.VM{}, fmt.Errorf("connection %s: listing its VMs failed (check the connection's options and that its hypervisor answers): %w", in.Connection, err)
	}
	if in.Socket != "" {
		if len(vms) == 0 {
			return hypervisor.VM{}, fmt.Errorf("%w: no VM answers on %s (is the monitor in use by another client?)", hypervisor.ErrNotFound, in.Socket)
		}
		return vms[0], nil
	}
	for _, vm := range vms {
		if vm.Name == in.VM || vm.ID == in.VM {
			return vm, nil
		}
	}
	return hypervisor.VM{}, fmt.Errorf("%w: connection %s has no VM named or identified %q (`coffer vms` lists its VMs)", hypervisor.ErrNotFound, in.Connection, in.VM)
}

// closeEngine closes an engine made for one backup; what its close
// reports is only worth a warning, the backup's outcome being decided.
func (s Ops) closeEngine(eng *engine.Engine) {
	if err := eng.Close(); err != nil {
		s.Logger().Warn("closing the backup's engine", "err", err)
	}
}
