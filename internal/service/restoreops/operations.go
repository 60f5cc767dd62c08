package restoreops

import (
	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/service"
)

// Operations are this domain's rows of the operation table.
var Operations = []service.Operation{
	{ID: "restore-disk", Method: "RestoreDisks", Summary: "restore disks of a backup point to files or block devices", HTTP: service.Post,
		Path: "/repositories/{repo}/points/{point}/restore", Requires: []service.Requirement{service.ReadPoint},
		Endpoint: service.Returns(Ops.RestoreDisks)},
	{ID: "list-storage-snapshots", Method: "StorageSnapshots", Summary: "list the storage snapshots policies keep as restore points (keep-storage-snapshots)",
		HTTP: service.Get, Path: "/storage-snapshots", Requires: service.Lists(auth.PolicyAudit, auth.PoliciesPath),
		Endpoint: service.Returns(Ops.StorageSnapshots)},
	{ID: "restore-storage-snapshot", Method: "RestoreFromStorage", Summary: "restore a VM's disk files from a kept storage snapshot, by cloning them (a task)",
		HTTP: service.Post, Path: "/storage-snapshots/{label}/restore", Requires: service.Require(auth.ConnRestore, service.OnConns),
		Endpoint: service.Returns(Ops.RestoreFromStorage)},
	{ID: "forget-storage-snapshot", Method: "ForgetStorageSnapshot", Summary: "delete a kept storage snapshot before its policy's retention does",
		HTTP: service.Delete, Path: "/storage-snapshots/{label}", Requires: service.Require(auth.PolicyModify, auth.PoliciesPath),
		Endpoint: service.Returns(Ops.ForgetStorageSnapshot)},
	{ID: "restore-vm", Method: "RestoreVM", Summary: "restore a backup point as a new VM (QEMU or through a connection)", HTTP: service.Post,
		Path:     "/repositories/{repo}/points/{point}/restore-vm",
		Requires: []service.Requirement{service.ReadPoint, {Privilege: auth.ConnRestore, Object: "/connections/{connection}"}},
		Endpoint: service.Returns(Ops.RestoreVM)},
	{ID: "files-volumes", Method: "FilesVolumes", Summary: "list the partitions and volumes of a backed-up disk", HTTP: service.Get,
		Path: "/repositories/{repo}/points/{point}/volumes", Requires: []service.Requirement{service.ReadPoint},
		Endpoint: service.Returns(Ops.FilesVolumes)},
	{ID: "files-list", Method: "FilesList", Summary: "list a directory inside a backed-up disk", HTTP: service.Get,
		Path: "/repositories/{repo}/points/{point}/files", Requires: []service.Requirement{service.ReadPoint},
		Endpoint: service.Returns(Ops.FilesList)},
	{ID: "files-extract", Method: "FilesExtract", Summary: "extract files or trees from a backed-up disk into a directory", HTTP: service.Post,
		Path: "/repositories/{repo}/points/{point}/files/extract", Requires: []service.Requirement{service.ReadPoint},
		NoConsole: "writes files into a directory of the server's host (`coffer files get`): the console downloads them to the browser instead (files-archive)",
		Endpoint:  service.Returns(Ops.FilesExtract)},
	{ID: "files-archive", Method: "FilesArchive", Summary: "stream files or trees from a backed-up disk as a zip or tar archive",
		HTTP: service.Get, Path: "/repositories/{repo}/points/{point}/files/archive", Requires: []service.Requirement{service.ReadPoint},
		Endpoint: service.Download[api.FilesArchiveInput]{Types: []string{"application/zip", "application/x-tar"}, File: archiveFile, Run: epFilesArchive}},
	{ID: "files-find", Method: "FilesFind", Summary: "find files by name inside a backed-up disk", HTTP: service.Get,
		Path: "/repositories/{repo}/points/{point}/files/find", Requires: []service.Requirement{service.ReadPoint},
		Endpoint: service.Returns(Ops.FilesFind)},

	// Instant recovery.
	{ID: "instant-start", Method: "InstantStart", Summary: "run a VM straight from its backup point", HTTP: service.Post,
		Path: "/repositories/{repo}/points/{point}/instant", Requires: []service.Requirement{service.ReadPoint, {Privilege: auth.ConnRestore, Object: service.OnConns}},
		Endpoint: service.Endpoint[api.InstantStartInput, service.Created[*api.InstantSession]](epInstantStart)},
	{ID: "instant-serve", Method: "InstantServe", Summary: "serve an instant recovery again and resume its VM", HTTP: service.Post,
		Path:     "/repositories/{repo}/instant/{session}/serve",
		Requires: []service.Requirement{{Privilege: auth.RepoRead, Object: service.OnRepo}, {Privilege: auth.ConnRestore, Object: service.OnConns}},
		Endpoint: service.Endpoint[api.InstantServeInput, service.Result[*api.InstantSession]](epInstantServe)},
	{ID: "instant-list", Method: "InstantList", Summary: "list instant recovery sessions", HTTP: service.Get, Path: "/instant",
		Requires: service.Require(auth.ConnAudit, service.OnConns), Endpoint: service.Returns(Ops.InstantList)},
	{ID: "instant-commit", Method: "InstantCommit", Summary: "move a recovered VM live onto production storage", HTTP: service.Post,
		Path: "/instant/{session}/commit", Requires: service.Require(auth.ConnRestore, service.OnConns),
		Endpoint: service.Returns(Ops.InstantCommit)},
	{ID: "instant-discard", Method: "InstantDiscard", Summary: "stop a recovered VM and delete what it wrote", HTTP: service.Delete,
		Path: "/instant/{session}", Requires: service.Require(auth.ConnRestore, service.OnConns),
		Endpoint: service.Returns(Ops.InstantDiscard)},
	{ID: "instant-export", Method: "InstantExport", Summary: "serve a backup point's disks read-only over NBD", HTTP: service.Post,
		Path: "/repositories/{repo}/points/{point}/export", Requires: []service.Requirement{service.ReadPoint},
		NoConsole: "serves a point's disks over NBD to a client on the network (`coffer instant export`): the NBD client uses it, not a browser",
		Endpoint:  service.Endpoint[api.InstantExportInput, service.Created[*api.Export]](epExport)},
	{ID: "verify-boot", Method: "VerifyBoot", Summary: "boot a backup point isolated and check that it comes up (console, agent, probes, screenshot)",
		HTTP: service.Post, Path: "/repositories/{repo}/points/{point}/verify-boot",
		Requires: []service.Requirement{service.ReadPoint, {Privilege: auth.RepoVerify, Object: service.OnRepo}},
		Endpoint: service.Returns(Ops.VerifyBoot)},
}
