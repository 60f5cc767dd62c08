// Package apidoc makes the API's documents (internal/api) of coffer's own
// records: points read from a repository or the catalog, retention's
// verdicts, and what reading files from a disk skipped. Every face (the
// API, the command line's --json, the console) shows these documents,
// so one conversion serves them all.
package apidoc

import (
	"cmp"
	"fmt"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/bootverify"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/files"
	"github.com/coffer-backup/coffer/internal/forget"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/retention"
)

// PointDoc is the document of a point read from the repository whose ID is
// RepositoryID.
func PointDoc(repositoryID string, s *repo.Point) api.BackupPoint {
	p := api.BackupPoint{ID: s.ID.String(), ShortID: s.ID.Short(), Repository: repositoryID, Time: s.Time,
		VM: s.Source.VMName, VMID: s.Source.VMID, Connection: s.Source.Connection, SourceKind: s.Source.Kind, Host: s.Host,
		Mode: s.Mode, SnapshotMode: s.SnapshotMode, SnapshotModeAchieved: api.AchievedMode(s.SnapshotModeAchieved), Hooks: s.Hooks,
		Parent: s.Parent, Tags: NonNilTags(s.Tags), Protected: s.Protected, LockedUntil: s.RetainUntil, JobID: s.JobID,
		DiskCount: len(s.Disks), LogicalBytes: s.Logical(), StoredBytes: s.BytesStored, ReadBytes: s.BytesRead,
		NewBytes: s.BytesNew, DurationSeconds: s.Duration, Disks: []api.PointDisk{}, Warnings: NonNil(s.Warnings)}
	for _, d := range s.Disks {
		p.Disks = append(p.Disks, api.PointDisk{Key: d.Key, Name: d.Name, Kind: cmp.Or(d.Kind, "disk"), SizeBytes: d.Size,
			ChunkSizeBytes: d.ChunkSize, Format: d.Format, Path: d.Path, Mode: d.Mode, Warning: d.Warning,
			ReadBytes: d.BytesRead, ZeroBytes: d.BytesZero, NewBytes: d.BytesNew, LostSpans: d.LostSpans})
	}
	return p
}

// CatalogPointDoc is the document of a point the catalog recorded. The
// catalog keeps fewer fields than the manifest: what it lacks is left out.
func CatalogPointDoc(p catalog.BackupPoint) api.BackupPoint {
	return api.BackupPoint{ID: p.ID, ShortID: short(p.ID), Repository: p.Repository, Time: p.Time,
		VM: p.VMName, VMID: p.VMID, Connection: p.Connection, SourceKind: sourceKind(p),
		Mode: p.Mode, SnapshotMode: p.SnapshotMode, SnapshotModeAchieved: api.AchievedMode(p.SnapshotModeAchieved), Hooks: p.Hooks,
		Parent: p.Parent, Tags: NonNilTags(p.Tags), Protected: p.Protected, JobID: p.JobID, DiskCount: p.Disks,
		LogicalBytes: p.BytesLogical, StoredBytes: p.BytesStored}
}

// sourceKind: the catalog does not record the source's kind, but a point
// without a connection is a disk image's.
func sourceKind(p catalog.BackupPoint) string {
	if p.Connection == "" {
		return "disk"
	}
	return ""
}

// NonNil returns l, or an empty list for nil: documents print [] rather than
// null.
func NonNil[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

func NonNilTags(t map[string]string) map[string]string {
	if t == nil {
		return map[string]string{}
	}
	return t
}

func short(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

// KeepPolicy is a request's keep rules as retention applies them.
func KeepPolicy(k api.KeepRules) retention.Policy {
	return retention.Policy{Last: k.Last, Hourly: k.Hourly, Daily: k.Daily, Weekly: k.Weekly, Monthly: k.Monthly, Yearly: k.Yearly,
		Within: k.Within()}
}

// KeepRules is a retention policy as a request states it (schedules run
// forget with a policy's retention).
func KeepRules(p retention.Policy) api.KeepRules {
	return api.KeepRules{Last: p.Last, Hourly: p.Hourly, Daily: p.Daily, Weekly: p.Weekly, Monthly: p.Monthly, Yearly: p.Yearly,
		WithinSeconds: p.Within.Seconds()}
}

// ForgetDocs turns forget's verdicts into documents; the points under
// object lock are named with their lock's end.
func ForgetDocs(groups []forget.Group) []api.ForgetSource {
	out := []api.ForgetSource{}
	for _, g := range groups {
		src := api.ForgetSource{VM: g.Source.VMName, VMID: g.Source.VMID, Connection: g.Source.Connection, SourceKind: g.Source.Kind,
			Keep: verdicts(g.Keep), Remove: verdicts(g.Remove), Locked: []api.LockedPoint{}}
		for _, l := range g.Locked {
			src.Locked = append(src.Locked, api.LockedPoint{PointID: l.ID, LockedUntil: l.Until})
		}
		out = append(out, src)
	}
	return out
}

func verdicts(ds []retention.Decision) []api.PointVerdict {
	out := []api.PointVerdict{}
	for _, d := range ds {
		out = append(out, api.PointVerdict{PointID: d.ID, Time: d.Time, Protected: d.Protected, Reasons: NonNil(d.Reasons)})
	}
	return out
}

// The documents of what reading files from a backed-up disk skipped or
// warned about, shared by the file browser and the restores from media.

// SkippedError makes anything skipped a partial failure; done says what
// happened to the rest.
func SkippedError(skipped []api.Skip, done string) error {
	if len(skipped) == 0 {
		return nil
	}
	return api.Errorf(api.Partial, "%s skipped (listed above); everything else was %s", Entries(len(skipped)), done)
}

func SkipDocs(sk []files.Skip) []api.Skip {
	out := make([]api.Skip, 0, len(sk))
	for _, s := range sk {
		out = append(out, api.Skip{Path: s.Path, Reason: s.Reason})
	}
	return out
}

func WarningDocs(d *files.Disk) []api.Warning {
	out := []api.Warning{}
	for _, w := range d.Warnings() {
		out = append(out, api.Warning{Message: w.Message, Count: w.Count})
	}
	return out
}

// Entries is "1 entry" or "N entries".
func Entries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}

// BootVerification is the document of a boot verification's result, as
// `coffer verify boot` prints it and the repository keeps it.
func BootVerification(res *bootverify.Result) *api.BootVerification {
	d := &api.BootVerification{PointID: res.PointID, VM: res.VM, Started: res.Started, DurationSeconds: res.Duration.Seconds(),
		Passed: res.Passed, FailedStep: res.FailedStep, Steps: []api.BootStep{}, ScreenshotPNG: res.Screenshot, ConsoleTail: res.ConsoleTail,
		Review: res.Review, CannotVerify: res.CannotVerify}
	for _, st := range res.Steps {
		ev := map[string]string{}
		for k, v := range st.Evidence {
			ev[k] = v
		}
		d.Steps = append(d.Steps, api.BootStep{Number: st.Number, Name: st.Name, Status: st.Status,
			DurationSeconds: st.Duration.Seconds(), Detail: st.Detail, Evidence: ev})
	}
	return d
}
