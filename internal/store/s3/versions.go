package s3

import (
	"context"
	"fmt"
	"slices"
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
// keyPrefix (full keys, bucket prefix included), oldest first per key and
// the current entry last. S3 lists a key's versions newest first, which is
// their true order; times have a second's resolution, so a delete marker
// is placed among them by time, after versions of the same second.
func (s *Store) listVersions(ctx context.Context, keyPrefix string) (map[string][]listedVersion, error) {
	versions, markers := map[string][]listedVersion{}, map[string][]listedVersion{}
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
			versions[k] = append(versions[k], listedVersion{store.Version{ID: versionID(v.VersionId), ModTime: aws.ToTime(v.LastModified)}, aws.ToBool(v.IsLatest)})
		}
		for _, m := range out.DeleteMarkers {
			k := aws.ToString(m.Key)
			markers[k] = append(markers[k], listedVersion{store.Version{ID: versionID(m.VersionId), Marker: true, ModTime: aws.ToTime(m.LastModified)}, aws.ToBool(m.IsLatest)})
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
	all := map[string][]listedVersion{}
	for k, vs := range versions {
		slices.Reverse(vs)
		all[k] = vs
	}
	for k, ms := range markers {
		slices.Reverse(ms)
		for _, m := range ms {
			vs := all[k]
			i := sort.Search(len(vs), func(i int) bool { return vs[i].v.ModTime.After(m.v.ModTime) })
			all[k] = slices.Insert(vs, i, m)
		}
	}
	for _, vs := range all {
		for i, v := range vs {
			if v.latest && i != len(vs)-1 {
				copy(vs[i:], vs[i+1:])
				vs[len(vs)-1] = v
				break
			}
		}
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
// retention, so on a bucket with Object Lock every version is asked (in
// parallel, within the store's connection bound).
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

// versionRetention asks GetObjectRetention: HEAD of a version that is not
// the current one does not report its lock on every server (versitygw).
func (s *Store) versionRetention(ctx context.Context, key, version string) (time.Time, error) {
	if !s.retention {
		return time.Time{}, nil
	}
	if err := s.acquire(ctx); err != nil {
		return time.Time{}, err
	}
	defer s.release()
	out, err := s.cli.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: &s.cfg.Bucket, Key: &key, VersionId: &version})
	switch {
	case errorCode(err) == "NoSuchObjectLockConfiguration":
		return time.Time{}, nil // a version without a lock
	case err != nil:
		return time.Time{}, translate(err)
	case out.Retention == nil:
		return time.Time{}, nil
	}
	return aws.ToTime(out.Retention.RetainUntilDate), nil
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
