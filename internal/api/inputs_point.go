package api

import (
	"strings"
	"time"
)

// The inputs of the operations that back up, restore and read backup
// points (restores, the file browser, instant recovery, boot
// verification) and of the storage snapshots policies keep.

// PointParam is the backup point a request names.
type PointParam struct {
	RepoParam
	Point string `path:"point" maxLength:"64" example:"latest" doc:"a backup point: its ID, a unique ID prefix, or latest"`
}

// WorkerParam names the fleet's worker an operation runs on: its host's
// paths, devices and hypervisor (a restore onto that host, a boot
// verification where QEMU runs). Empty: the server runs it.
type WorkerParam struct {
	Worker string `query:"worker" maxLength:"56" doc:"run on this worker of the fleet, on its host (default: the server)"`
}

// DiskParam is a disk of the point a request names.
type DiskParam struct {
	PointParam
	Disk string `query:"disk" maxLength:"255" doc:"the disk: index, key or name (default: the first)"`
}

// Ref is the point and disk in the command line's BACKUP[:DISK] form.
func (d *DiskParam) Ref() string {
	if d.Disk == "" {
		return d.Point
	}
	return d.Point + ":" + d.Disk
}

// DiskParamOf reads the command line's BACKUP[:DISK] form.
func DiskParamOf(ref string) DiskParam {
	point, disk, _ := strings.Cut(ref, ":")
	return DiskParam{PointParam: PointParam{Point: point}, Disk: disk}
}

// Seconds is a request's duration in seconds as a time.Duration.
func Seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// ListStorageSnapshotsInput filters the storage snapshots policies keep.
type ListStorageSnapshotsInput struct {
	Policy string `query:"policy" maxLength:"255" doc:"only this policy's"`
	VM     string `query:"vm" maxLength:"255" doc:"only those holding this VM (name or ID)"`
}

// LabelParam is the label of a kept storage snapshot.
// (Exported: huma reads the parameters of embedded structs only when
// their type is exported.)
type LabelParam struct {
	Label string `path:"label" minLength:"8" maxLength:"207" pattern:"^coffer-[A-Za-z0-9._-]+$" doc:"the storage snapshot's label"`
}

// RestoreStorageSnapshotInput restores one VM's disk files from a kept
// storage snapshot.
type RestoreStorageSnapshotInput struct {
	LabelParam
	Body StorageRestoreRequest
}

// ShipStorageSnapshotsInput ships kept btrfs or reflink snapshots to their
// providers' ship-to directories.
type ShipStorageSnapshotsInput struct {
	Provider string `query:"provider" maxLength:"255" doc:"only this storage-snapshots provider's"`
}

// ForgetStorageSnapshotInput deletes a kept storage snapshot.
type ForgetStorageSnapshotInput struct {
	LabelParam
}

// VerifyBootInput boots a backup point isolated and checks it.
type VerifyBootInput struct {
	WorkerParam
	PointParam
	Body VerifyBootRequest
}

// ListBootVerificationsInput lists the boot verifications a repository
// keeps.
type ListBootVerificationsInput struct {
	RepoParam
	VM string `query:"vm" maxLength:"255" doc:"only this VM's"`
}

// BootVerificationInput names the backup point whose stored boot
// verification is read: its ID, a unique prefix, latest, or a VM's name
// (its newest point), as verify-boot takes it.
type BootVerificationInput struct {
	PointParam
}

// BootScreenshotInput names the backup point whose stored boot
// verification's screenshot is read, as BootVerificationInput does.
type BootScreenshotInput struct {
	PointParam
}

// Timeout bounds the whole ladder (0: the default, 5 minutes).
func (r VerifyBootRequest) Timeout() time.Duration { return Seconds(r.TimeoutSeconds) }

// ProbeTimeout bounds each probe (0: the default, 30 s).
func (r VerifyBootRequest) ProbeTimeout() time.Duration { return Seconds(r.ProbeTimeoutSeconds) }

// RestoreDiskInput restores disks of a backup point.
type RestoreDiskInput struct {
	WorkerParam
	PointParam
	Body RestoreRequest
}

// RestoreVMInput restores a backup point as a new VM.
type RestoreVMInput struct {
	WorkerParam
	PointParam
	Connection string `query:"connection" maxLength:"255" doc:"restore through this connection of the server's configuration (default: a QEMU VM in a directory)"`
	Body       RestoreVMRequest
}

// FilesVolumesInput lists the partitions and volumes of a backed-up disk.
type FilesVolumesInput struct {
	DiskParam
}

// FilesListInput lists a directory inside a backed-up disk.
type FilesListInput struct {
	DiskParam
	Path string `query:"path" maxLength:"4096" doc:"a directory inside the disk's file system (default: /)"`
}

// FilesExtractInput extracts files or trees from a backed-up disk into a
// directory.
type FilesExtractInput struct {
	WorkerParam
	DiskParam
	Body FilesExtractRequest
}

// FilesArchiveInput streams files or trees from a backed-up disk as an
// archive.
type FilesArchiveInput struct {
	DiskParam
	Paths  []string `query:"path,explode" required:"true" minItems:"1" maxItems:"1000" doc:"files or directories to put in the archive (repeat the parameter)"`
	Format string   `query:"format" enum:"zip,tar" default:"zip"`
}

// FilesFindInput finds files by name inside a backed-up disk.
type FilesFindInput struct {
	DiskParam
	Under   string `query:"under" maxLength:"4096" doc:"the directory to search (default: /)"`
	Pattern string `query:"pattern" required:"true" minLength:"1" maxLength:"255" doc:"a glob pattern matched against names"`
}

// InstantStartInput runs a VM straight from its backup point.
type InstantStartInput struct {
	PointParam
	Body InstantStartRequest
}

// ReconnectDelay is how long the VM's reads wait for a lost server before
// the VM pauses.
func (r InstantStartRequest) ReconnectDelay() time.Duration { return Seconds(r.ReconnectDelaySeconds) }

// SessionParam is the instant recovery session a request names.
type SessionParam struct {
	Session string `path:"session" maxLength:"64" doc:"an instant recovery session's ID"`
}

// InstantServeInput serves an instant recovery again.
type InstantServeInput struct {
	RepoParam
	SessionParam
}

// InstantListInput lists the instant recovery sessions (it takes no
// parameters).
type InstantListInput struct{}

// InstantCommitInput moves a recovered VM onto production storage.
type InstantCommitInput struct {
	SessionParam
	Body InstantCommitRequest
}

// InstantDiscardInput stops a recovered VM and deletes what it wrote.
type InstantDiscardInput struct {
	SessionParam
}

// InstantExportInput serves a backup point's disks over NBD.
type InstantExportInput struct {
	PointParam
	Body ExportRequest
}

// BackupDiskInput backs up disk images or block devices as one backup
// point.
type BackupDiskInput struct {
	RepoParam
	Body BackupDiskRequest
}

// BackupVMInput backs up a VM of a connection now.
type BackupVMInput struct {
	RepoParam
	Connection string `path:"connection" maxLength:"255" doc:"a connection of the server's configuration"`
	VM         string `path:"vm" maxLength:"255" doc:"the VM's name or ID"`
	Body       BackupVMRequest
}
