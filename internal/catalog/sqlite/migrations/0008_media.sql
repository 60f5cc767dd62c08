-- Schema version 8 (SQLite): the media catalogue. A volume is a labelled
-- cartridge as its last index on the medium describes it; a segment is the
-- part of one backup point's stream on one volume, with its block runs
-- (extents, JSON). Both are rebuilt from the volumes by `coffer media
-- catalog`. postgres/migrations/0008_media.sql is the same schema in
-- PostgreSQL types.

CREATE TABLE media_volumes (
	barcode         TEXT PRIMARY KEY,
	library         TEXT NOT NULL DEFAULT '',
	pool            TEXT NOT NULL,
	media_set       TEXT NOT NULL,
	block_size      INTEGER NOT NULL,
	labelled_at     INTEGER,
	written_at      INTEGER,
	protected_until INTEGER,
	is_full         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX media_volumes_pool ON media_volumes (pool, barcode);

CREATE TABLE media_segments (
	barcode    TEXT NOT NULL REFERENCES media_volumes (barcode) ON DELETE CASCADE,
	session    TEXT NOT NULL,
	stream     INTEGER NOT NULL,
	point      TEXT NOT NULL,
	vm         TEXT NOT NULL DEFAULT '',
	repository TEXT NOT NULL DEFAULT '',
	point_time INTEGER,
	first_seq  INTEGER NOT NULL,
	last_seq   INTEGER NOT NULL,
	bytes      INTEGER NOT NULL,
	end_of_stream INTEGER NOT NULL DEFAULT 0,
	extents    TEXT NOT NULL,
	PRIMARY KEY (barcode, session, stream, first_seq)
);
CREATE INDEX media_segments_point ON media_segments (point, session, stream, first_seq);
