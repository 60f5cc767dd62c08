package backupops

import (
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/service"
)

// Operations are this domain's rows of the operation table.
var Operations = []service.Operation{
	{ID: "backup-disk", Method: "BackupDisk", Summary: "back up disk images or block devices as one backup point", HTTP: service.Post,
		Path: "/repositories/{repo}/backups/disk", Requires: service.Require(auth.RepoBackup, service.OnRepo),
		NoConsole: "backs up a file or device by its path on the server's host, an administrator's ad-hoc job (`coffer backup disk`): the console backs VMs up through their policies (Run now)",
		Endpoint:  service.Returns(Ops.BackupDisk)},
	{ID: "backup-vm", Method: "BackupVM", Summary: "back up a VM of a connection now (qemu, libvirt, vsphere), or a running QEMU VM through its QMP monitor",
		HTTP: service.Post, Path: "/repositories/{repo}/backups/vm/{connection}/{vm}",
		Requires: []service.Requirement{{Privilege: auth.RepoBackup, Object: service.OnRepo}, {Privilege: auth.ConnBackup, Object: "/connections/{connection}/vm/{vm}"}},
		Endpoint: service.Returns(Ops.BackupVM)},
	{ID: "backup-policy", Method: "BackupPolicy", Summary: "run a backup policy now", HTTP: service.Post, Path: "/policies/{policy}/run",
		Requires: service.Require(auth.PolicyRun, service.OnPolicy), Endpoint: service.Returns(Ops.BackupPolicy)},
	{ID: "bench-device", Method: "BenchDevice", Summary: "measure a device of the server's host: sequential read, write and both at once (recorded in the catalog)",
		HTTP: service.Post, Path: "/system/bench/device", Requires: service.Require(auth.SysModify, auth.SystemPath),
		NoConsole: "measures a device of the server's host for its administrator (`coffer bench device`): a diagnostic, not a backup task",
		Endpoint:  service.Returns(Ops.BenchDevice)},
	{ID: "bench-pipeline", Method: "BenchPipeline", Summary: "measure coffer's pipeline per core at each compression level on the server's host (recorded in the catalog)",
		HTTP: service.Post, Path: "/system/bench/pipeline", Requires: service.Require(auth.SysModify, auth.SystemPath),
		NoConsole: "measures the server's read, hash, compress and encrypt pipeline for its administrator (`coffer bench pipeline`): a diagnostic",
		Endpoint:  service.Returns(Ops.BenchPipeline)},
	{ID: "start-bench-pipeline", Method: "StartBenchPipeline", Summary: "measure coffer's pipeline on the server's host as a task: answers at once with the running task, whose log gets the results (then recorded for the planner like bench-pipeline's)",
		HTTP: service.Post, Path: "/system/bench/pipeline/start", Requires: service.Require(auth.SysModify, auth.SystemPath),
		Endpoint: service.Returns(Ops.StartBenchPipeline)},
}
