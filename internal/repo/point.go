package repo

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/store"
)

const (
	snapshotsPrefix   = "snapshots/"
	snapshotSeal      = "snapshot"
	snapshotHeaderLen = 16
	// ManifestVersion is the JSON schema version of manifests.
	ManifestVersion = 1
)

var snapshotMagic = [8]byte{'C', 'O', 'F', 'S', 'N', 'A', 'P', 0}

// ErrSnapshotNotFound is returned for an unknown snapshot ID or prefix.
var ErrSnapshotNotFound = errors.New("no such snapshot")

// ErrCorruptManifest means a manifest failed authentication or parsing.
var ErrCorruptManifest = errors.New("snapshot manifest corrupt")

// Point is a backup point: one VM (or a set of disk images) at one
// instant. It is everything needed to list and restore the point without a
// catalog: VM identity and configuration, and per disk its disk map.
type Point struct {
	ID           id.ID             `json:"-"`
	Version      int               `json:"version"`
	Time         time.Time         `json:"time"`
	Host         string            `json:"host"` // where coffer ran
	Source       Source            `json:"source"`
	Tags         map[string]string `json:"tags,omitempty"`
	Mode         string            `json:"mode"`                    // full, incremental, differential
	SnapshotMode string            `json:"snapshot_mode,omitempty"` // as requested: quiesced, ...
	Parent       string            `json:"parent,omitempty"`        // previous point of the same source
	BaseFull     string            `json:"base_full,omitempty"`     // last full point (differential base)
	VMConfig     json.RawMessage   `json:"vm_config,omitempty"`
	Disks        []Disk            `json:"disks"`
	Warnings     []string          `json:"warnings,omitempty"`
	Protected    bool              `json:"protected,omitempty"`
	RetainUntil  time.Time         `json:"retain_until,omitzero"`
	JobID        int64             `json:"job_id,omitempty"`
	Duration     float64           `json:"duration_seconds"`
	BytesRead    int64             `json:"bytes_read"`
	BytesNew     int64             `json:"bytes_new"`    // plaintext bytes of chunks stored by this backup
	BytesStored  int64             `json:"bytes_stored"` // bytes added to the repository
	ChunksNew    int               `json:"chunks_new"`
	ChunksTotal  int               `json:"chunks_total"`
	BytesLogical int64             `json:"bytes_logical"`

	headerDamaged error

	// SnapshotModeAchieved is the snapshot mode the connector really
	// carried out (a quiesce fallback is crash-consistent); empty in
	// manifests written before coffer recorded it.
	SnapshotModeAchieved string `json:"snapshot_mode_achieved,omitempty"`
	// Hooks is how the policy's application hooks around the snapshot
	// went: "ok", "pre-failed" (the point is not application-consistent),
	// "post-failed" (it is; the application may need attention), or ""
	// when none ran. Warnings say which hook failed and why.
	Hooks string `json:"hooks,omitempty"`
}

// Source identifies what was backed up.
type Source struct {
	Kind       string `json:"kind"` // "disk", "qemu", "vsphere", ...
	Connection string `json:"connection,omitempty"`
	VMID       string `json:"vm_id,omitempty"`
	VMName     string `json:"vm_name"`
}

// Key is what successive points of the same source share.
func (s Source) Key() string {
	return s.Kind + "\x00" + s.Connection + "\x00" + s.VMID + "\x00" + s.VMName
}

// Disk is one disk (or memory-state stream) of a backup point.
type Disk struct {
	Key         string `json:"key"`
	Name        string `json:"name"`
	Kind        string `json:"kind"` // "disk" or "memory"
	Size        int64  `json:"size"`
	ChunkSize   int    `json:"chunk_size"`
	Map         string `json:"map"` // store name of the disk map
	Format      string `json:"format,omitempty"`
	Path        string `json:"path,omitempty"`
	ChangeToken string `json:"change_token,omitempty"`
	Mode        string `json:"mode"` // how it was read: full, incremental, differential, compared
	Warning     string `json:"warning,omitempty"`
	BytesRead   int64  `json:"bytes_read"`
	BytesZero   int64  `json:"bytes_zero"` // holes and all-zero chunks
	BytesNew    int64  `json:"bytes_new"`
	// ChangeCheckSpans spans change tracking called unchanged were read
	// to check it; ChangeCheckDiffer of them had changed, and the disk
	// was then read in full (internal/backup/changecheck.go).
	ChangeCheckSpans  int `json:"change_check_spans,omitempty"`
	ChangeCheckDiffer int `json:"change_check_differ,omitempty"`
	// LostSpans counts spans a repair recorded as lost (repo.LostChunk in
	// the disk map): the point restores with those ranges missing.
	LostSpans int64 `json:"lost_spans,omitempty"`
}

// Logical is the sum of disk sizes.
func (s *Point) Logical() int64 {
	var n int64
	for _, d := range s.Disks {
		n += d.Size
	}
	return n
}

func snapshotName(x id.ID) string { return snapshotsPrefix + x.String() }

var (
	manifestEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	manifestDec, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(64<<20))
)

func (r *Repository) encodeSnapshot(s *Point) ([]byte, error) {
	s.Version = ManifestVersion
	s.BytesLogical = s.Logical()
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	out := make([]byte, snapshotHeaderLen, snapshotHeaderLen+len(raw)/2)
	copy(out, snapshotMagic[:])
	binary.LittleEndian.PutUint16(out[8:], ManifestVersion)
	return r.key.Seal(out, manifestEnc.EncodeAll(raw, nil), snapshotSeal), nil
}

func (r *Repository) decodeSnapshot(x id.ID, b []byte) (*Point, error) {
	if len(b) < snapshotHeaderLen {
		return nil, fmt.Errorf("snapshot %s: %w: %d bytes is too short", x.Short(), ErrCorruptManifest, len(b))
	}
	// The header is not authenticated. A damaged one is tolerated when the
	// body authenticates as a version 1 manifest: a newer version changes
	// its seal context, so it never authenticates as version 1.
	var headerErr error
	if [8]byte(b[:8]) != snapshotMagic {
		headerErr = fmt.Errorf("snapshot %s: %w: bad magic", x.Short(), ErrCorruptManifest)
	} else if v := binary.LittleEndian.Uint16(b[8:]); v > ManifestVersion {
		headerErr = fmt.Errorf("snapshot %s: %w: manifest version %d is newer than this coffer (%d)", x.Short(), ErrUnsupportedVersion, v, ManifestVersion)
	}
	comp, err := r.key.Open(nil, b[snapshotHeaderLen:], snapshotSeal)
	if err != nil {
		if headerErr != nil {
			return nil, headerErr
		}
		return nil, fmt.Errorf("snapshot %s: %w: %w", x.Short(), ErrCorruptManifest, err)
	}
	raw, err := manifestDec.DecodeAll(comp, nil)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w: %v", x.Short(), ErrCorruptManifest, err)
	}
	s := &Point{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w: %v", x.Short(), ErrCorruptManifest, err)
	}
	s.ID = x
	s.headerDamaged = headerErr
	return s, nil
}

// HeaderDamaged reports a manifest whose damaged header was tolerated
// because its authenticated body proved it readable.
func (s *Point) HeaderDamaged() error { return s.headerDamaged }

// saveSnapshot writes a manifest; the caller guarantees everything it
// references is already durable (see Writer.Commit).
func (r *Repository) saveSnapshot(ctx context.Context, s *Point) error {
	b, err := r.encodeSnapshot(s)
	if err != nil {
		return err
	}
	opts := store.PutOptions{IfNotExists: r.st.Properties().ConditionalWrites, RetainUntil: s.RetainUntil}
	if _, err := store.Put(ctx, r.st, snapshotName(s.ID), b, opts); err != nil {
		return fmt.Errorf("write snapshot %s: %w", s.ID.Short(), err)
	}
	return nil
}

// UpdatePoint rewrites an existing manifest in place (protection flag,
// retention). The object is replaced atomically.
func (r *Repository) UpdatePoint(ctx context.Context, s *Point) error {
	r.history.forget(s.ID)
	b, err := r.encodeSnapshot(s)
	if err != nil {
		return err
	}
	opts := store.PutOptions{}
	if s.RetainUntil.After(time.Now()) { // a lock that has ended is not asked for again
		opts.RetainUntil = s.RetainUntil
	}
	_, err = store.Put(ctx, r.st, snapshotName(s.ID), b, opts)
	return err
}

// LoadPoint reads one manifest by full ID.
func (r *Repository) LoadPoint(ctx context.Context, x id.ID) (*Point, error) {
	b, err := store.Get(ctx, r.st, snapshotName(x), 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrSnapshotNotFound, x.Short())
	}
	if err != nil {
		return nil, err
	}
	return r.decodeSnapshot(x, b)
}

// ListPointIDs lists the IDs of all manifests.
func (r *Repository) ListPointIDs(ctx context.Context) ([]id.ID, error) {
	var ids []id.ID
	err := r.st.List(ctx, snapshotsPrefix, func(fi store.ObjectInfo) error {
		x, err := id.Parse(strings.TrimPrefix(fi.Name, snapshotsPrefix))
		if err != nil {
			r.log.Warn("ignoring unexpected object", "name", fi.Name)
			return nil
		}
		ids = append(ids, x)
		return nil
	})
	return ids, err
}

// Points loads all manifests, oldest first. A manifest that cannot be
// read is reported through bad (if non-nil) and skipped, so corruption of
// one point never hides the others.
func (r *Repository) Points(ctx context.Context, bad func(id.ID, error)) ([]*Point, error) {
	ids, err := r.ListPointIDs(ctx)
	if err != nil {
		return nil, err
	}
	list, err := r.loadPoints(ctx, ids, bad)
	if err != nil {
		return nil, err
	}
	sortPoints(list)
	return list, nil
}

// loadPoints loads the manifests ids, several at once, leaving out those
// gone meanwhile and those that cannot be read (reported through bad, if
// non-nil), as Points does.
func (r *Repository) loadPoints(ctx context.Context, ids []id.ID, bad func(id.ID, error)) ([]*Point, error) {
	out := make([]*Point, len(ids))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, x := range ids {
		g.Go(func() error {
			s, err := r.LoadPoint(gctx, x)
			if err != nil {
				if errors.Is(err, ErrSnapshotNotFound) { // forgotten meanwhile
					return nil
				}
				if !errors.Is(err, ErrCorruptManifest) && !errors.Is(err, ErrUnsupportedVersion) {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				if bad != nil {
					bad(x, err)
				}
				return nil
			}
			out[i] = s
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	list := out[:0]
	for _, s := range out {
		if s != nil {
			list = append(list, s)
		}
	}
	return list, nil
}

// sortPoints orders points oldest first.
func sortPoints(list []*Point) {
	sort.Slice(list, func(i, j int) bool { return list[i].Time.Before(list[j].Time) })
}

// FindPoint resolves a full ID, a unique prefix, or "latest".
func (r *Repository) FindPoint(ctx context.Context, ref string) (*Point, error) {
	if ref == "latest" {
		all, err := r.Points(ctx, nil)
		if err != nil {
			return nil, err
		}
		if len(all) == 0 {
			return nil, fmt.Errorf("%w: the repository has no snapshots", ErrSnapshotNotFound)
		}
		return all[len(all)-1], nil
	}
	ids, err := r.ListPointIDs(ctx)
	if err != nil {
		return nil, err
	}
	var match []id.ID
	for _, x := range ids {
		if strings.HasPrefix(x.String(), strings.ToLower(ref)) {
			match = append(match, x)
		}
	}
	switch {
	case ref == "" || len(match) == 0:
		return nil, fmt.Errorf("%w: %q", ErrSnapshotNotFound, ref)
	case len(match) > 1:
		return nil, fmt.Errorf("%w: snapshot ID %q is ambiguous: %d snapshots start with it", ErrAmbiguous, ref, len(match))
	}
	return r.LoadPoint(ctx, match[0])
}

// DeletePoint removes a manifest and then its disk maps. A crash in
// between leaves orphan maps that garbage collection removes.
func (r *Repository) DeletePoint(ctx context.Context, s *Point) error {
	r.history.forget(s.ID)
	if err := r.st.Delete(ctx, snapshotName(s.ID)); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("delete snapshot %s: %w", s.ID.Short(), err)
	}
	for _, d := range s.Disks {
		if err := r.st.Delete(ctx, d.Map); err != nil && !errors.Is(err, store.ErrNotFound) {
			r.log.Warn("disk map left for garbage collection", "map", d.Map, "err", err)
		}
	}
	// The point's boot verification goes with it (most points have none).
	if err := r.st.Delete(ctx, bootVerifyPrefix+s.ID.String()); err != nil && !errors.Is(err, store.ErrNotFound) {
		r.log.Warn("boot verification of a forgotten point left behind", "point", s.ID.Short(), "err", err)
	}
	return nil
}
