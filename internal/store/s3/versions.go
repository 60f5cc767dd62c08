package s3

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/coffer-backup/coffer/internal/store"
)

// listedVersion is one entry of ListObjectVersions before it is sorted.
type listedVersion struct {
	v      store.Version
	latest bool
}

// listVersions returns every version and delete marker of the keys under
// keyPrefix (full keys, bucket prefix included), oldest first per key: the
// current entry last, the rest by time.
func (s *Store) listVersions(ctx context.Context, keyPrefix string) (map[string][]listedVersion, error) {
	all := map[string][]listedVersion{}
	in := &s3.ListObjectVersionsInput{Bucket: &s.cfg.Bucket, Prefix: &keyPrefix}
	for {
		if err := s.acquire(ctx); err != nil {
			return nil, err
		}
		out, err := s.cli.ListObjectVersions(ctx, in)
		s.release()
		if err != nil {
			return nil, translate(err)
		}
		for _, v := range out.Versions {
			k := aws.ToString(v.Key)
			all[k] = append(all[k], listedVersion{store.Version{ID: versionID(v.VersionId), ModTime: aws.ToTime(v.LastModified)}, aws.ToBool(v.IsLatest)})
		}
		for _, m := range out.DeleteMarkers {
			k := aws.ToString(m.Key)
			all[k] = append(all[k], listedVersion{store.Version{ID: versionID(m.VersionId), Marker: true, ModTime: aws.ToTime(m.LastModified)}, aws.ToBool(m.IsLatest)})
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
	for _, vs := range all {
		sort.SliceStable(vs, func(i, j int) bool {
			if vs[i].latest != vs[j].latest {
				return !vs[i].latest
			}
			return vs[i].v.ModTime.Before(vs[j].v.ModTime)
		})
	}
	return all, nil
}

// versionID names the version written while versioning was off "null".
func versionID(p *string) string {
	if id := aws.ToString(p); id != "" {
		return id
	}
	return "null"
}

// Versions implements store.Versioned. Listing does not tell a version's
// retention, so every version is asked (in parallel, within the store's
// connection bound).
func (s *Store) Versions(ctx context.Context, prefix string, fn func(name string, versions []store.Version) error) error {
	all, err := s.listVersions(ctx, s.prefix+prefix)
	if err != nil {
		return fmt.Errorf("list versions of %q: %w", prefix, err)
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		if validName(strings.TrimPrefix(k, s.prefix)) == nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make(map[string][]store.Version, len(keys))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, k := range keys {
		name := strings.TrimPrefix(k, s.prefix)
		vs := make([]store.Version, len(all[k]))
		out[k] = vs
		for i, lv := range all[k] {
			vs[i] = lv.v
			vs[i].Name = name
			if lv.v.Marker {
				continue
			}
			wg.Go(func() {
				until, err := s.versionRetention(ctx, k, lv.v.ID)
				mu.Lock()
				defer mu.Unlock()
				if err != nil && first == nil {
					first = fmt.Errorf("retention of %s (version %s): %w", name, lv.v.ID, err)
				}
				vs[i].RetainUntil = until
			})
		}
	}
	wg.Wait()
	if first != nil {
		return first
	}
	for _, k := range keys {
		if err := fn(strings.TrimPrefix(k, s.prefix), out[k]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) versionRetention(ctx context.Context, key, version string) (time.Time, error) {
	if err := s.acquire(ctx); err != nil {
		return time.Time{}, err
	}
	defer s.release()
	out, err := s.cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: &key, VersionId: &version})
	if err != nil {
		return time.Time{}, translate(err)
	}
	return aws.ToTime(out.ObjectLockRetainUntilDate), nil
}

// ExtendVersionRetention implements store.Versioned.
func (s *Store) ExtendVersionRetention(ctx context.Context, v store.Version, until time.Time) error {
	if !s.retention || v.Marker || !v.RetainUntil.Before(until) {
		return nil
	}
	key, err := s.key(v.Name)
	if err != nil {
		return err
	}
	u, id := until.UTC(), v.ID
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	_, err = s.cli.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{Bucket: &s.cfg.Bucket, Key: &key, VersionId: &id,
		Retention:         &types.ObjectLockRetention{Mode: types.ObjectLockRetentionMode(s.lockMode), RetainUntilDate: &u},
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
	if err != nil {
		return fmt.Errorf("extend retention of %s (version %s): %w", v.Name, v.ID, translate(err))
	}
	return nil
}

// DeleteVersion implements store.Versioned.
func (s *Store) DeleteVersion(ctx context.Context, v store.Version) error {
	if v.RetainUntil.After(time.Now()) {
		return fmt.Errorf("delete %s (version %s): locked until %s: %w", v.Name, v.ID, v.RetainUntil.Format(time.RFC3339), store.ErrRetained)
	}
	key, err := s.key(v.Name)
	if err != nil {
		return err
	}
	return s.deleteVersion(ctx, v.Name, key, v.ID)
}
