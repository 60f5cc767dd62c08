package service

// Operation is one use case every face offers: the command line runs it
// through a command, the REST API through a route, both calling the
// service method named here. ID is the operation's one name: the CLI's
// commands declare the IDs they run, the server registers its routes by
// them (and the audit log and OpenAPI operationId will use them), and a
// test fails when a face lacks one.
type Operation struct {
	ID string
	// Method is the *Service method that runs it.
	Method  string
	Summary string
}

// Operations lists every operation.
var Operations = []Operation{
	{"init-repository", "Init", "create a repository"},
	{"list-points", "Points", "list the backup points of a repository, from the repository"},
	{"list-catalog-points", "CatalogPoints", "list backup points from the catalog"},
	{"rebuild-catalog", "RebuildCatalog", "recreate the catalog's backup points from a repository"},
	{"backup-disk", "BackupDisk", "back up disk images or block devices as one backup point"},
	{"backup-vm", "BackupQEMU", "back up a running QEMU VM through its QMP monitor"},
	{"backup-policy", "RunPolicy", "run a backup policy now"},
	{"restore-disk", "RestoreDisks", "restore disks of a backup point to files or block devices"},
	{"restore-vm", "RestoreVM", "restore a backup point as a new VM (QEMU or through a connection)"},
	{"files-volumes", "FilesVolumes", "list the partitions and volumes of a backed-up disk"},
	{"files-list", "FilesList", "list a directory inside a backed-up disk"},
	{"files-extract", "FilesExtract", "extract files or trees from a backed-up disk into a directory"},
	{"files-archive", "FilesArchive", "stream files or trees from a backed-up disk as a zip or tar archive"},
	{"files-find", "FilesFind", "find files by name inside a backed-up disk"},
	{"instant-start", "InstantStart", "run a VM straight from its backup point"},
	{"instant-serve", "InstantServe", "serve an instant recovery again and resume its VM"},
	{"instant-list", "InstantList", "list instant recovery sessions"},
	{"instant-commit", "InstantCommit", "move a recovered VM live onto production storage"},
	{"instant-discard", "InstantDiscard", "stop a recovered VM and delete what it wrote"},
	{"instant-export", "InstantExport", "serve a backup point's disks read-only over NBD"},
	{"verify", "Verify", "check a repository's integrity"},
	{"verify-boot", "VerifyBoot", "boot a backup point isolated and check that it comes up (console, agent, probes, screenshot)"},
	{"forget", "Forget", "remove backup points by keep rules"},
	{"protect", "Protect", "protect backup points from forget, or release them"},
	{"gc", "GC", "delete what no backup point needs"},
	{"stats", "Stats", "a repository's sizes and ratios"},
	{"copy", "Copy", "copy backup points to a second repository"},
	{"repair", "Repair", "mend damage verify found, keeping everything readable"},
	{"undelete", "Undelete", "bring back locked objects hidden by deletes (object lock)"},
	{"list-keys", "Keys", "list a repository's keys"},
	{"add-key", "AddKey", "add a password to a repository"},
	{"remove-key", "RemoveKey", "remove a key"},
	{"list-leases", "Leases", "list who works on a repository"},
	{"list-jobs", "Jobs", "list jobs from the catalog"},
	{"get-job", "Job", "a job with its per-VM tasks and events"},
	{"list-vms", "VMs", "the VMs of every connection and what protects them"},
	{"check-policies", "PolicyCheck", "validate the policies and say what each will do"},
	{"preview-policy", "PolicyPreview", "what a policy run would select, when it runs next, what its retention keeps"},
	{"preview-policy-draft", "PolicyPreview", "what a policy not saved yet would select, when it would run, what its retention would keep"},
	{"get-effective-config", "EffectiveConfig", "the configuration in effect: the file's objects and the API's, with the source of each"},
	// Configuration objects (configobjects.go; ConfigOperationID names
	// them): policies, connections, repositories, notification targets
	// and matchers, each listed, read, created, changed and deleted.
	{"list-connections", "ConfigObjects", "list the connections, with where each is defined"},
	{"get-connection", "ConfigObject", "a connection and its version"},
	{"create-connection", "CreateConfigObject", "create a connection"},
	{"update-connection", "UpdateConfigObject", "change a connection created through the API"},
	{"delete-connection", "DeleteConfigObject", "delete a connection no policy uses"},
	{"list-repositories", "ConfigObjects", "list the repositories of the configuration, with where each is defined"},
	{"get-repository", "ConfigObject", "a repository of the configuration and its version"},
	{"create-repository", "CreateConfigObject", "add a repository to the configuration"},
	{"update-repository", "UpdateConfigObject", "change a repository created through the API"},
	{"delete-repository", "DeleteConfigObject", "remove a repository no policy uses from the configuration (its data stays)"},
	{"list-policies", "ConfigObjects", "list the policies, with where each is defined"},
	{"get-policy", "ConfigObject", "a policy and its version"},
	{"create-policy", "CreateConfigObject", "create a policy"},
	{"update-policy", "UpdateConfigObject", "change a policy created through the API"},
	{"delete-policy", "DeleteConfigObject", "delete a policy (its jobs and points stay)"},
	{"list-notification-targets", "ConfigObjects", "list the notification targets, with where each is defined"},
	{"get-notification-target", "ConfigObject", "a notification target and its version"},
	{"create-notification-target", "CreateConfigObject", "create a notification target"},
	{"update-notification-target", "UpdateConfigObject", "change a notification target created through the API"},
	{"delete-notification-target", "DeleteConfigObject", "delete a notification target no matcher names"},
	{"list-notification-matchers", "ConfigObjects", "list the notification matchers, with where each is defined"},
	{"get-notification-matcher", "ConfigObject", "a notification matcher and its version"},
	{"create-notification-matcher", "CreateConfigObject", "create a notification matcher"},
	{"update-notification-matcher", "UpdateConfigObject", "change a notification matcher created through the API"},
	{"delete-notification-matcher", "DeleteConfigObject", "delete a notification matcher"},
}
