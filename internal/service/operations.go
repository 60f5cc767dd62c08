package service

import (
	"net/http"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/configobj"
)

// Operation is one use case every face offers, defined once (PBS's
// #[api] in Go): the command line runs it through a command, the REST API
// through the route registered from this entry, both calling the service
// method named here. ID is the operation's one name: the CLI's commands
// declare the IDs they run, the server registers its routes by them, the
// audit log records them and they are the OpenAPI operationIds; a test
// fails when a face lacks one.
type Operation struct {
	ID string
	// Method is the *Service method that runs it.
	Method  string
	Summary string

	// HTTP is the route: method and path below /api/v1, with {name}
	// parameters.
	HTTP, Path string
	// Requires are the privileges the caller must hold, each on an ACL
	// object whose {name} parameters come from the request's path or
	// query; they are checked before the endpoint runs. SelfService says
	// instead why the operation declares none: internal/auth checks its
	// own rules with the caller passed in (one's password, one's tokens),
	// or it is how a caller signs in at all.
	Requires    []Requirement
	SelfService string
	// Public operations need no credentials: signing in, out, and the
	// first choice of a password with a setup link.
	Public bool
	// AuditsItself: the operation records itself (and its refusals) in
	// the transaction that makes the change (internal/auth's, the
	// configuration objects': RecordsOwnAudit); the server records every
	// other mutating operation.
	AuditsItself bool
	// Endpoint binds the operation to HTTP.
	Endpoint Registrar
	// MaxBodyBytes bounds the request body (0: 64 KiB).
	MaxBodyBytes int64
	// NotOnCommandLine says why the command line does not offer the
	// operation (it belongs to a browser session).
	NotOnCommandLine string
}

// Mutating reports an operation that changes something: every one of
// them is recorded in the audit log.
func (o Operation) Mutating() bool { return o.HTTP != http.MethodGet }

// Requirement is a privilege on an ACL object.
type Requirement struct {
	Privilege auth.Privilege
	// Object is an ACL path template: "/repositories/{repo}". A
	// parameter left empty ends the path before it ("/connections/{c}"
	// with no c is "/connections").
	Object string
	Reach  Reach
}

// Reach says how a requirement reaches its object.
type Reach int

const (
	// OnObject: the privilege on the object itself (inherited as the ACL
	// says).
	OnObject Reach = iota
	// ThroughVM: the object is a repository holding the request's
	// {point}; the privilege on the point's VM is enough too (a tenant
	// restores its VMs' points from a shared repository).
	ThroughVM
	// Listing: the operation lists items and shows only those the caller
	// holds the privilege on; it is refused only when the caller holds it
	// nowhere at or below the object (nor, for repository privileges, on
	// any VM).
	Listing
)

// Paths of the objects operations check, for the table below.
const (
	onRepo   = "/repositories/{repo}"
	onConns  = auth.ConnectionsPath
	onPolicy = "/policies/{policy}"
)

func Require(p auth.Privilege, object string) []Requirement {
	return []Requirement{{Privilege: p, Object: object}}
}

func Lists(p auth.Privilege, object string) []Requirement {
	return []Requirement{{Privilege: p, Object: object, Reach: Listing}}
}

// seeJobs is who sees a job.
const seeJobs = "one's own jobs; everyone's with Sys.Audit on /system/tasks; a policy's runs with Policy.Audit on it, " +
	"a repository's or a media library's operations with Repo.Audit on it"

// readPoint is reading data out of a repository's point.
var readPoint = Requirement{Privilege: auth.RepoRead, Object: onRepo, Reach: ThroughVM}

const (
	Get, Post, Put, Delete = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete
	KiB                    = 1 << 10
)

// Operations lists every operation: those below, then the configuration
// objects' (configOperations: every verb on every kind).
var Operations = append([]Operation{
	// The repository and its backup points.
	{ID: "init-repository", Method: "Init", Summary: "create a repository", HTTP: Post, Path: "/repositories/{repo}/init",
		Requires: Require(auth.RepoModify, onRepo), Endpoint: Returns((*Service).Init)},
	{ID: "list-points", Method: "Points", Summary: "list the backup points of a repository, from the repository", HTTP: Get,
		Path: "/repositories/{repo}/points", Requires: Lists(auth.RepoAudit, onRepo), Endpoint: Returns((*Service).Points)},
	{ID: "list-catalog-points", Method: "CatalogPoints", Summary: "list backup points from the catalog", HTTP: Get, Path: "/points",
		Requires: Lists(auth.RepoAudit, auth.RepositoriesPath), Endpoint: ReturnsPage((*Service).CatalogPoints)},
	{ID: "rebuild-catalog", Method: "RebuildCatalog", Summary: "recreate the catalog's backup points from a repository", HTTP: Post,
		Path: "/repositories/{repo}/catalog/rebuild", Requires: Require(auth.RepoModify, onRepo),
		Endpoint: Returns((*Service).RebuildCatalog)},
	{ID: "backup-disk", Method: "BackupDisk", Summary: "back up disk images or block devices as one backup point", HTTP: Post,
		Path: "/repositories/{repo}/backups/disk", Requires: Require(auth.RepoBackup, onRepo),
		Endpoint: Returns((*Service).BackupDisk)},
	{ID: "backup-vm", Method: "BackupVM", Summary: "back up a VM of a connection now (qemu, libvirt, vsphere), or a running QEMU VM through its QMP monitor",
		HTTP: Post, Path: "/repositories/{repo}/backups/vm/{connection}/{vm}",
		Requires: []Requirement{{Privilege: auth.RepoBackup, Object: onRepo}, {Privilege: auth.ConnBackup, Object: "/connections/{connection}/vm/{vm}"}},
		Endpoint: Returns((*Service).BackupVM)},
	{ID: "backup-policy", Method: "BackupPolicy", Summary: "run a backup policy now", HTTP: Post, Path: "/policies/{policy}/run",
		Requires: Require(auth.PolicyRun, onPolicy), Endpoint: Returns((*Service).BackupPolicy)},
	{ID: "restore-disk", Method: "RestoreDisks", Summary: "restore disks of a backup point to files or block devices", HTTP: Post,
		Path: "/repositories/{repo}/points/{point}/restore", Requires: []Requirement{readPoint},
		Endpoint: Returns((*Service).RestoreDisks)},
	{ID: "list-storage-snapshots", Method: "StorageSnapshots", Summary: "list the storage snapshots policies keep as restore points (keep-storage-snapshots)",
		HTTP: Get, Path: "/storage-snapshots", Requires: Lists(auth.PolicyAudit, auth.PoliciesPath),
		Endpoint: Returns((*Service).StorageSnapshots)},
	{ID: "restore-storage-snapshot", Method: "RestoreFromStorage", Summary: "restore a VM's disk files from a kept storage snapshot, by cloning them (a task)",
		HTTP: Post, Path: "/storage-snapshots/{label}/restore", Requires: Require(auth.ConnRestore, onConns),
		Endpoint: Returns((*Service).RestoreFromStorage)},
	{ID: "forget-storage-snapshot", Method: "ForgetStorageSnapshot", Summary: "delete a kept storage snapshot before its policy's retention does",
		HTTP: Delete, Path: "/storage-snapshots/{label}", Requires: Require(auth.PolicyModify, auth.PoliciesPath),
		Endpoint: Returns((*Service).ForgetStorageSnapshot)},
	{ID: "restore-vm", Method: "RestoreVM", Summary: "restore a backup point as a new VM (QEMU or through a connection)", HTTP: Post,
		Path:     "/repositories/{repo}/points/{point}/restore-vm",
		Requires: []Requirement{readPoint, {Privilege: auth.ConnRestore, Object: "/connections/{connection}"}},
		Endpoint: Returns((*Service).RestoreVM)},
	{ID: "files-volumes", Method: "FilesVolumes", Summary: "list the partitions and volumes of a backed-up disk", HTTP: Get,
		Path: "/repositories/{repo}/points/{point}/volumes", Requires: []Requirement{readPoint},
		Endpoint: Returns((*Service).FilesVolumes)},
	{ID: "files-list", Method: "FilesList", Summary: "list a directory inside a backed-up disk", HTTP: Get,
		Path: "/repositories/{repo}/points/{point}/files", Requires: []Requirement{readPoint},
		Endpoint: Returns((*Service).FilesList)},
	{ID: "files-extract", Method: "FilesExtract", Summary: "extract files or trees from a backed-up disk into a directory", HTTP: Post,
		Path: "/repositories/{repo}/points/{point}/files/extract", Requires: []Requirement{readPoint},
		Endpoint: Returns((*Service).FilesExtract)},
	{ID: "files-archive", Method: "FilesArchive", Summary: "stream files or trees from a backed-up disk as a zip or tar archive",
		HTTP: Get, Path: "/repositories/{repo}/points/{point}/files/archive", Requires: []Requirement{readPoint},
		Endpoint: Download[api.FilesArchiveInput]{Types: []string{"application/zip", "application/x-tar"}, File: archiveFile, Run: epFilesArchive}},
	{ID: "files-find", Method: "FilesFind", Summary: "find files by name inside a backed-up disk", HTTP: Get,
		Path: "/repositories/{repo}/points/{point}/files/find", Requires: []Requirement{readPoint},
		Endpoint: Returns((*Service).FilesFind)},

	// Instant recovery.
	{ID: "instant-start", Method: "InstantStart", Summary: "run a VM straight from its backup point", HTTP: Post,
		Path: "/repositories/{repo}/points/{point}/instant", Requires: []Requirement{readPoint, {Privilege: auth.ConnRestore, Object: onConns}},
		Endpoint: Endpoint[api.InstantStartInput, Created[*api.InstantSession]](epInstantStart)},
	{ID: "instant-serve", Method: "InstantServe", Summary: "serve an instant recovery again and resume its VM", HTTP: Post,
		Path:     "/repositories/{repo}/instant/{session}/serve",
		Requires: []Requirement{{Privilege: auth.RepoRead, Object: onRepo}, {Privilege: auth.ConnRestore, Object: onConns}},
		Endpoint: Endpoint[api.InstantServeInput, Result[*api.InstantSession]](epInstantServe)},
	{ID: "instant-list", Method: "InstantList", Summary: "list instant recovery sessions", HTTP: Get, Path: "/instant",
		Requires: Require(auth.ConnAudit, onConns), Endpoint: Returns((*Service).InstantList)},
	{ID: "instant-commit", Method: "InstantCommit", Summary: "move a recovered VM live onto production storage", HTTP: Post,
		Path: "/instant/{session}/commit", Requires: Require(auth.ConnRestore, onConns),
		Endpoint: Returns((*Service).InstantCommit)},
	{ID: "instant-discard", Method: "InstantDiscard", Summary: "stop a recovered VM and delete what it wrote", HTTP: Delete,
		Path: "/instant/{session}", Requires: Require(auth.ConnRestore, onConns),
		Endpoint: Returns((*Service).InstantDiscard)},
	{ID: "instant-export", Method: "InstantExport", Summary: "serve a backup point's disks read-only over NBD", HTTP: Post,
		Path: "/repositories/{repo}/points/{point}/export", Requires: []Requirement{readPoint},
		Endpoint: Endpoint[api.InstantExportInput, Created[*api.Export]](epExport)},

	// Maintenance.
	{ID: "verify", Method: "Verify", Summary: "check a repository's integrity", HTTP: Post, Path: "/repositories/{repo}/verify",
		Requires: Require(auth.RepoVerify, onRepo), Endpoint: Returns((*Service).Verify)},
	{ID: "verify-boot", Method: "VerifyBoot", Summary: "boot a backup point isolated and check that it comes up (console, agent, probes, screenshot)",
		HTTP: Post, Path: "/repositories/{repo}/points/{point}/verify-boot",
		Requires: []Requirement{readPoint, {Privilege: auth.RepoVerify, Object: onRepo}},
		Endpoint: Returns((*Service).VerifyBoot)},
	{ID: "forget", Method: "Forget", Summary: "remove backup points by keep rules", HTTP: Post, Path: "/repositories/{repo}/forget",
		Requires: Require(auth.RepoPrune, onRepo), Endpoint: Returns((*Service).Forget)},
	{ID: "protect", Method: "Protect", Summary: "protect backup points from forget, or release them", HTTP: Post,
		Path: "/repositories/{repo}/protect", Requires: Require(auth.RepoPrune, onRepo),
		Endpoint: Returns((*Service).Protect)},
	{ID: "gc", Method: "GC", Summary: "delete what no backup point needs", HTTP: Post, Path: "/repositories/{repo}/gc",
		Requires: Require(auth.RepoPrune, onRepo), Endpoint: Returns((*Service).GC)},
	{ID: "stats", Method: "Stats", Summary: "a repository's sizes and ratios", HTTP: Get, Path: "/repositories/{repo}/stats",
		Requires: Require(auth.RepoAudit, onRepo), Endpoint: Returns((*Service).Stats)},
	{ID: "repository-usage", Method: "RepositoryUsage", Summary: "a repository's usage over the last 30 days, its trend and its estimated full date",
		HTTP: Get, Path: "/repositories/{repo}/usage", Requires: Require(auth.RepoAudit, onRepo),
		NotOnCommandLine: "the console's trend: `coffer stats` prints the sizes now, and the samples are the server's",
		Endpoint:         Returns((*Service).RepositoryUsage)},
	{ID: "copy", Method: "Copy", Summary: "copy backup points to a second repository", HTTP: Post, Path: "/repositories/{repo}/copy",
		Requires:     []Requirement{{Privilege: auth.RepoRead, Object: onRepo}, {Privilege: auth.RepoBackup, Object: "/repositories/{to}"}},
		MaxBodyBytes: 256 * KiB, Endpoint: Returns((*Service).Copy)},
	{ID: "repair", Method: "Repair", Summary: "mend damage verify found, keeping everything readable", HTTP: Post,
		Path: "/repositories/{repo}/repair/{what}", Requires: Require(auth.RepoModify, onRepo),
		Endpoint: Returns((*Service).Repair)},
	{ID: "undelete", Method: "Undelete", Summary: "bring back locked objects hidden by deletes (object lock)", HTTP: Post,
		Path: "/repositories/{repo}/undelete", Requires: Require(auth.RepoModify, onRepo),
		Endpoint: Returns((*Service).Undelete)},
	{ID: "list-keys", Method: "Keys", Summary: "list a repository's keys", HTTP: Get, Path: "/repositories/{repo}/keys",
		Requires: Require(auth.RepoAudit, onRepo), Endpoint: Returns((*Service).Keys)},
	{ID: "add-key", Method: "AddKey", Summary: "add a password to a repository", HTTP: Post, Path: "/repositories/{repo}/keys",
		Requires: Require(auth.RepoModify, onRepo), Endpoint: Creates((*Service).AddKey)},
	{ID: "remove-key", Method: "RemoveKey", Summary: "remove a key", HTTP: Delete, Path: "/repositories/{repo}/keys/{key}",
		Requires: Require(auth.RepoModify, onRepo), Endpoint: Returns((*Service).RemoveKey)},
	{ID: "list-leases", Method: "Leases", Summary: "list who works on a repository", HTTP: Get, Path: "/repositories/{repo}/leases",
		Requires: Require(auth.RepoAudit, onRepo), Endpoint: Returns((*Service).Leases)},

	// Sequential media: libraries of the configuration, their volumes and
	// what is on them (endpoints_media.go).
	{ID: "media-library-status", Method: "MediaLibraryStatus", Summary: "a media library's drives and slots and the cartridges in them (as mtx status)",
		HTTP: Get, Path: "/media/libraries/{library}/status", Requires: Require(auth.RepoAudit, onLibrary),
		Endpoint: Returns(served((*Service).MediaLibraryStatus))},
	{ID: "media-load", Method: "MediaLoad", Summary: "load a cartridge of a media library into one of its drives (as mtx load, by barcode)", HTTP: Post,
		Path: "/media/libraries/{library}/drives/{drive}/load", Requires: Require(auth.RepoModify, onLibrary),
		Endpoint: Returns(served((*Service).MediaLoad))},
	{ID: "media-unload", Method: "MediaUnload", Summary: "return the cartridge in a drive of a media library to its slot (as mtx unload)", HTTP: Post,
		Path: "/media/libraries/{library}/drives/{drive}/unload", Requires: Require(auth.RepoModify, onLibrary),
		Endpoint: Returns(served((*Service).MediaUnload))},
	{ID: "media-label", Method: "MediaLabel", Summary: "label a cartridge of a media library into a media pool, erasing it", HTTP: Post,
		Path: "/media/libraries/{library}/label", Requires: Require(auth.RepoModify, onLibrary),
		Endpoint: Returns(served((*Service).MediaLabel))},
	{ID: "media-copy", Method: "MediaCopy", Summary: "copy backup points to a media pool of a library, multiplexed onto its drive (a task)", HTTP: Post,
		Path:         "/repositories/{repo}/media-copy",
		Requires:     []Requirement{{Privilege: auth.RepoRead, Object: onRepo}, {Privilege: auth.RepoBackup, Object: onLibrary}},
		MaxBodyBytes: 256 * KiB, Endpoint: Returns(served((*Service).MediaCopy))},
	{ID: "media-restore", Method: "MediaRestore", Summary: "restore a backup point's disks from a media library, without its repository (a task)",
		HTTP: Post, Path: "/media/libraries/{library}/points/{point}/restore", Requires: Require(auth.RepoRead, onLibrary),
		Endpoint: Returns(served((*Service).MediaRestore))},
	{ID: "media-files-extract", Method: "MediaFilesExtract", Summary: "extract files from a backed-up disk on media, without its repository (a task)",
		HTTP: Post, Path: "/media/libraries/{library}/points/{point}/files/extract", Requires: Require(auth.RepoRead, onLibrary),
		Endpoint: Returns(served((*Service).MediaFilesExtract))},
	{ID: "media-verify", Method: "MediaVerify", Summary: "read a volume back: every block's checksum, its index and the media catalogue compared (a task)",
		HTTP: Post, Path: "/media/libraries/{library}/volumes/{barcode}/verify", Requires: Require(auth.RepoVerify, onLibrary),
		Endpoint: Returns(served((*Service).MediaVerify))},
	{ID: "rebuild-media-catalog", Method: "MediaCatalog", Summary: "rebuild the media catalogue from a library's volumes alone", HTTP: Post,
		Path: "/media/libraries/{library}/catalog/rebuild", Requires: Require(auth.RepoModify, onLibrary),
		Endpoint: Returns(served((*Service).MediaCatalog))},
	{ID: "list-media-volumes", Method: "MediaVolumes", Summary: "list the volumes of the media catalogue, with their pools, retention and WORM",
		HTTP: Get, Path: "/media/volumes", Requires: Lists(auth.RepoAudit, auth.MediaPath),
		Endpoint: Returns((*Service).MediaVolumes)},
	{ID: "media-contents", Method: "MediaContents", Summary: "list which blocks of which volumes hold backup points", HTTP: Get,
		Path: "/media/contents", Requires: Lists(auth.RepoAudit, auth.MediaPath),
		Endpoint: Returns((*Service).MediaContents)},

	// Jobs, VMs and policies.
	{ID: "list-jobs", Method: "Jobs", Summary: "list jobs (the tasks of every long operation and policy run), newest first", HTTP: Get,
		Path: "/jobs", SelfService: seeJobs, Endpoint: ReturnsPage((*Service).Jobs)},
	{ID: "get-job", Method: "Job", Summary: "a job with a page of its per-VM tasks and the first lines of its log", HTTP: Get, Path: "/jobs/{id}",
		SelfService: seeJobs, Endpoint: Answers((*Service).Job)},
	{ID: "job-log", Method: "JobLog", Summary: "a page of a job's log", HTTP: Get, Path: "/jobs/{id}/log",
		SelfService: seeJobs, Endpoint: Returns((*Service).JobLog)},
	{ID: "follow-job", Method: "FollowJob", Summary: "follow a job: its state, log lines and progress as server-sent events", HTTP: Get,
		Path: "/jobs/{id}/events", SelfService: seeJobs, Endpoint: Events[api.FollowJobInput]{Data: api.JobEvent{}, Names: []string{"status", "progress", "log"}, Run: epFollowJob}},
	{ID: "cancel-job", Method: "CancelJob", Summary: "ask a queued or running job to stop, wherever it runs", HTTP: Post,
		Path: "/jobs/{id}/cancel", SelfService: "one's own jobs; everyone's with Sys.Modify on /system/tasks; a policy's runs with Policy.Run on it",
		Endpoint: Returns((*Service).CancelJob)},
	{ID: "list-vms", Method: "VMs", Summary: "a page of the VMs of every connection (the inventory the server refreshes) and what protects them",
		HTTP: Get, Path: "/vms", Requires: Lists(auth.ConnAudit, onConns), Endpoint: Answers((*Service).VMs)},
	{ID: "protection-summary", Method: "ProtectionSummary", Summary: "how many VMs are within their RPO, outside it, without a point, selected by no policy (the dashboard's counts)",
		HTTP: Get, Path: "/vms/protection", Requires: Lists(auth.ConnAudit, onConns),
		Endpoint: Returns((*Service).ProtectionSummary)},
	{ID: "refresh-inventory", Method: "RefreshInventory", Summary: "list a connection's VMs into the inventory now (a task)", HTTP: Post,
		Path: "/connections/{conn}/inventory/refresh", Requires: Require(auth.ConnAudit, onConns+"/{conn}"),
		Endpoint: Returns((*Service).RefreshInventory)},
	{ID: "check-policies", Method: "PolicyCheck", Summary: "validate the policies and say what each will do", HTTP: Get,
		Path: "/policies/check", Requires: Require(auth.PolicyAudit, auth.PoliciesPath),
		Endpoint: Returns((*Service).PolicyCheck)},
	{ID: "preview-policy", Method: "PolicyPreview", Summary: "what a policy run would select, when it runs next, what its retention keeps",
		HTTP: Get, Path: "/policies/{policy}/preview", Requires: Require(auth.PolicyAudit, onPolicy),
		Endpoint: Returns((*Service).PolicyPreview)},
	{ID: "preview-policy-draft", Method: "PolicyDraftPreview", Summary: "what a policy not saved yet would select, when it would run, what its retention would keep",
		HTTP: Post, Path: "/policies/preview", Requires: Require(auth.PolicyAudit, auth.PoliciesPath),
		Endpoint: Returns((*Service).PolicyDraftPreview)},
	{ID: "plan-policy", Method: "Plan", Summary: "predict a policy's run (P50 and P90 windows, critical path, bottleneck, rule violations) beside what-ifs",
		HTTP: Get, Path: "/policies/{policy}/plan", Requires: Require(auth.PolicyAudit, onPolicy),
		Endpoint: Returns((*Service).Plan)},
	{ID: "plan-accuracy", Method: "PlanAccuracy", Summary: "set the predictions a policy's last runs recorded as they started beside what happened",
		HTTP: Get, Path: "/policies/{policy}/plan/accuracy", Requires: Require(auth.PolicyAudit, onPolicy),
		Endpoint: Returns((*Service).PlanAccuracy)},
	{ID: "plan-accuracies", Method: "PlanAccuracies", Summary: "the planner's record for every policy: each one's error, bias and share within P90 over its last runs (the dashboard's)",
		HTTP: Get, Path: "/policies/plan/accuracy", Requires: Require(auth.PolicyAudit, auth.PoliciesPath),
		Endpoint: Returns((*Service).PlanAccuracies)},
	{ID: "bench-device", Method: "BenchDevice", Summary: "measure a device of the server's host: sequential read, write and both at once (recorded in the catalog)",
		HTTP: Post, Path: "/system/bench/device", Requires: Require(auth.SysModify, auth.SystemPath),
		Endpoint: Returns((*Service).BenchDevice)},
	{ID: "bench-pipeline", Method: "BenchPipeline", Summary: "measure coffer's pipeline per core at each compression level on the server's host (recorded in the catalog)",
		HTTP: Post, Path: "/system/bench/pipeline", Requires: Require(auth.SysModify, auth.SystemPath),
		Endpoint: Returns((*Service).BenchPipeline)},
	{ID: "get-effective-config", Method: "EffectiveConfig", Summary: "the configuration in effect: the file's objects and the API's, with the source of each",
		HTTP: Get, Path: "/config/effective", Requires: Require(auth.SysAudit, auth.SystemPath),
		Endpoint: Returns((*Service).EffectiveConfig)},

	// Notifications (their targets and matchers are configuration objects).
	{ID: "test-notification-target", Method: "TestNotification", Summary: "send a test message to a notification target now (nothing is recorded)",
		HTTP: Post, Path: "/notifications/targets/{name}/test",
		Requires: Require(auth.SysModify, auth.SystemPath+"/"+configobj.NotificationTarget.Plural()+"/{name}"),
		Endpoint: Returns((*Service).TestNotification)},

	// Access control.
	{ID: "login", Public: true, AuditsItself: true, Method: "Login", Summary: "sign in with a password: the answer sets the session cookie", HTTP: Post,
		Path: "/access/login", SelfService: "signing in is how a caller gets a session (throttled and audited by internal/auth)",
		NotOnCommandLine: "a browser's sign-in: the command line uses API tokens", Endpoint: Endpoint[api.LoginInput, loginOut](epLogin)},
	{ID: "logout", Public: true, AuditsItself: true, Method: "Logout", Summary: "sign out: end the session of the cookie", HTTP: Post, Path: "/access/logout",
		SelfService: "ends the caller's own session, whatever it holds", NotOnCommandLine: "a browser's sign-out",
		Endpoint: Endpoint[api.LogoutInput, logoutOut](epLogout)},
	{ID: "complete-setup", Public: true, AuditsItself: true, Method: "CompleteSetup", Summary: "choose a password with a one-time setup link", HTTP: Post,
		Path: "/access/setup", SelfService: "the one-time link is the credential (checked by internal/auth)",
		NotOnCommandLine: "the setup link opens the console's setup page", Endpoint: Returns((*Service).CompleteSetup)},
	{ID: "whoami", Method: "WhoAmI", Summary: "who the caller is: the user signed in, and the API token", HTTP: Get,
		Path: "/access/whoami", SelfService: "everyone may ask who they are", NotOnCommandLine: "the console's header: the command line knows its token",
		Endpoint: Returns((*Service).WhoAmI)},
	{ID: "list-users", Method: "Users", Summary: "list the accounts (one's own without Sys.Audit on /access)", HTTP: Get,
		Path: "/access/users", SelfService: "everyone sees their own account; internal/auth shows the rest to Sys.Audit on /access",
		Endpoint: Returns((*Service).Users)},
	{ID: "create-user", AuditsItself: true, Method: "CreateUser", Summary: "create an account (with a one-time setup link when no password is given)",
		HTTP: Post, Path: "/access/users", Requires: Require(auth.PermModify, auth.AccessPath),
		Endpoint: Creates((*Service).CreateUser)},
	{ID: "enable-user", AuditsItself: true, Method: "EnableUser", Summary: "let a disabled user sign in again", HTTP: Post,
		Path: "/access/users/{user}/enable", Requires: Require(auth.PermModify, auth.AccessPath), Endpoint: ReturnsNothing((*Service).EnableUser)},
	{ID: "disable-user", AuditsItself: true, Method: "DisableUser", Summary: "end a user's sessions and stop its tokens", HTTP: Post,
		Path: "/access/users/{user}/disable", Requires: Require(auth.PermModify, auth.AccessPath), Endpoint: ReturnsNothing((*Service).DisableUser)},
	{ID: "delete-user", AuditsItself: true, Method: "DeleteUser", Summary: "delete an account with its tokens, sessions and ACL entries", HTTP: Delete,
		Path: "/access/users/{user}", Requires: Require(auth.PermModify, auth.AccessPath), Endpoint: ReturnsNothing((*Service).DeleteUser)},
	{ID: "issue-setup-link", AuditsItself: true, Method: "IssueSetupLink", Summary: "give a user a one-time link to choose a password", HTTP: Post,
		Path: "/access/users/{user}/setup-link", Requires: Require(auth.PermModify, auth.AccessPath),
		Endpoint: Creates((*Service).IssueSetupLink)},
	{ID: "change-password", AuditsItself: true, Method: "ChangePassword", Summary: "change a password (one's own with the old one)", HTTP: Post,
		Path: "/access/users/{user}/password", SelfService: "one's own password with the old one; others' need Perm.Modify on /access (internal/auth)",
		Endpoint: ReturnsNothing((*Service).ChangePassword)},
	{ID: "list-tokens", Method: "Tokens", Summary: "list a user's API tokens", HTTP: Get, Path: "/access/tokens",
		SelfService: "one's own tokens; others' need Sys.Audit on /access (internal/auth)", Endpoint: Returns((*Service).Tokens)},
	{ID: "create-token", AuditsItself: true, Method: "CreateToken", Summary: "create an API token (its secret is shown this once)", HTTP: Post,
		Path: "/access/tokens", SelfService: "one's own tokens, at most one's own rights; others' need Perm.Modify on /access (internal/auth)",
		Endpoint: Creates((*Service).CreateToken)},
	{ID: "revoke-token", AuditsItself: true, Method: "RevokeToken", Summary: "revoke an API token at once", HTTP: Delete, Path: "/access/tokens/{token}",
		SelfService: "one's own tokens (a token itself too); others' need Perm.Modify on /access (internal/auth)",
		Endpoint:    ReturnsNothing((*Service).RevokeToken)},
	{ID: "list-acl", Method: "ACL", Summary: "list ACL entries (one's own without Sys.Audit on /access)", HTTP: Get, Path: "/access/acl",
		SelfService: "everyone sees their own entries; internal/auth shows the rest to Sys.Audit on /access",
		Endpoint:    Returns((*Service).ACL)},
	{ID: "set-acl", AuditsItself: true, Method: "SetACL", Summary: "grant a role on a path to a user or an API token", HTTP: Put, Path: "/access/acl",
		SelfService: "needs Perm.Modify on the entry's path, or being the token's user (internal/auth checks the path in the body)",
		Endpoint:    ReturnsNothing((*Service).SetACL)},
	{ID: "remove-acl", AuditsItself: true, Method: "RemoveACL", Summary: "remove an ACL entry", HTTP: Post, Path: "/access/acl/remove",
		SelfService: "needs Perm.Modify on the entry's path, or being the token's user (internal/auth checks the path in the body)",
		Endpoint:    ReturnsNothing((*Service).RemoveACL)},
	{ID: "query-audit", Method: "Audit", Summary: "read the audit log, newest first (one's own records without Sys.Audit on /system)",
		HTTP: Get, Path: "/audit", SelfService: "everyone reads their own records; internal/auth shows the rest to Sys.Audit on /system",
		Endpoint: Returns((*Service).Audit)},
}, configOperations()...)
