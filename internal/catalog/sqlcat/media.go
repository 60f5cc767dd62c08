package sqlcat

import (
	"context"
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// ReplaceMediaVolume upserts a volume and replaces its segments in one
// transaction: readers see the volume's old index or its new one.
func (c *Catalog) ReplaceMediaVolume(ctx context.Context, v catalog.MediaVolume, segs []catalog.MediaSegment) error {
	if v.Barcode == "" || v.Pool == "" {
		return fmt.Errorf("catalog: replace media volume: a volume needs a barcode and a pool")
	}
	rows := make([][]any, len(segs))
	for i, s := range segs {
		if s.Barcode != v.Barcode {
			return fmt.Errorf("catalog: replace media volume %s: a segment of volume %s", v.Barcode, s.Barcode)
		}
		ext, err := jsonArg(s.Extents, 1)
		if err != nil {
			return fmt.Errorf("catalog: replace media volume: %w", err)
		}
		rows[i] = []any{s.Barcode, s.Session, s.Stream, s.Point, s.VM, s.Repository, c.timeArg(s.PointTime),
			s.FirstSeq, s.LastSeq, s.Bytes, s.End, ext}
	}
	upsert := c.d.Rebind(`INSERT INTO media_volumes (barcode, library, pool, media_set, block_size, labelled_at, written_at, protected_until, is_full, worm)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (barcode) DO UPDATE SET library = excluded.library, pool = excluded.pool, media_set = excluded.media_set,
			block_size = excluded.block_size, labelled_at = excluded.labelled_at, written_at = excluded.written_at,
			protected_until = excluded.protected_until, is_full = excluded.is_full, worm = excluded.worm`)
	del := c.d.Rebind(`DELETE FROM media_segments WHERE barcode = ?`)
	ins := c.d.Rebind(`INSERT INTO media_segments (barcode, session, stream, point, vm, repository, point_time,
		first_seq, last_seq, bytes, end_of_stream, extents) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	err := c.b.Write(ctx, func(tx Tx) error {
		if _, err := tx.Exec(ctx, upsert, v.Barcode, v.Library, v.Pool, v.MediaSet, v.BlockSize, c.timeArg(v.Labelled),
			c.timeArg(v.Written), c.timeArg(v.ProtectedUntil), v.Full, v.WORM); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, del, v.Barcode); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		_, err := tx.ExecBatch(ctx, ins, rows)
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: replace media volume %s: %w", v.Barcode, err)
	}
	return nil
}

// ListMediaVolumes lists volumes by barcode with their segment counts.
func (c *Catalog) ListMediaVolumes(ctx context.Context, pool string) ([]catalog.MediaVolume, error) {
	q := `SELECT v.barcode, v.library, v.pool, v.media_set, v.block_size, v.labelled_at, v.written_at, v.protected_until, v.is_full, v.worm,
		(SELECT COUNT(*) FROM media_segments s WHERE s.barcode = v.barcode)
		FROM media_volumes v`
	var args []any
	if pool != "" {
		q += ` WHERE v.pool = ?`
		args = append(args, pool)
	}
	q += ` ORDER BY v.barcode`
	var out []catalog.MediaVolume
	err := c.query(ctx, q, args, func(r Rows) error {
		var v catalog.MediaVolume
		err := r.Scan(&v.Barcode, &v.Library, &v.Pool, &v.MediaSet, &v.BlockSize, timeDest{&v.Labelled}, timeDest{&v.Written},
			timeDest{&v.ProtectedUntil}, &v.Full, &v.WORM, &v.Segments)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list media volumes: %w", err)
	}
	return out, nil
}

// ListMediaSegments lists segments by point, session, stream and first
// block number.
func (c *Catalog) ListMediaSegments(ctx context.Context, f catalog.MediaSegmentFilter) ([]catalog.MediaSegment, error) {
	var where []string
	var args []any
	if f.Point != "" {
		where, args = append(where, "point = ?"), append(args, f.Point)
	}
	if f.Barcode != "" {
		where, args = append(where, "barcode = ?"), append(args, f.Barcode)
	}
	q := `SELECT barcode, session, stream, point, vm, repository, point_time, first_seq, last_seq, bytes, end_of_stream, extents
		FROM media_segments`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += ` ORDER BY point, session, stream, first_seq`
	var out []catalog.MediaSegment
	err := c.query(ctx, q, args, func(r Rows) error {
		var s catalog.MediaSegment
		err := r.Scan(&s.Barcode, &s.Session, &s.Stream, &s.Point, &s.VM, &s.Repository, timeDest{&s.PointTime},
			&s.FirstSeq, &s.LastSeq, &s.Bytes, &s.End, jsonDest{&s.Extents})
		out = append(out, s)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list media segments: %w", err)
	}
	return out, nil
}

// DeleteMediaVolume forgets a volume and its segments.
func (c *Catalog) DeleteMediaVolume(ctx context.Context, barcode string) error {
	err := c.b.Write(ctx, func(tx Tx) error {
		if _, err := tx.Exec(ctx, c.d.Rebind(`DELETE FROM media_segments WHERE barcode = ?`), barcode); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, c.d.Rebind(`DELETE FROM media_volumes WHERE barcode = ?`), barcode)
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: delete media volume %s: %w", barcode, err)
	}
	return nil
}
