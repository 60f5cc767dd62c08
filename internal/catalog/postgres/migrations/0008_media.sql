-- Schema version 8 (PostgreSQL): sqlite/migrations/0008_media.sql in
-- native types (TIMESTAMPTZ, BOOLEAN; names in the "C" collation).

CREATE TABLE media_volumes (
	barcode         TEXT COLLATE "C" PRIMARY KEY,
	library         TEXT NOT NULL DEFAULT '',
	pool            TEXT COLLATE "C" NOT NULL,
	media_set       TEXT NOT NULL,
	block_size      INTEGER NOT NULL,
	labelled_at     TIMESTAMPTZ,
	written_at      TIMESTAMPTZ,
	protected_until TIMESTAMPTZ,
	is_full         BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX media_volumes_pool ON media_volumes (pool, barcode);

CREATE TABLE media_segments (
	barcode    TEXT COLLATE "C" NOT NULL REFERENCES media_volumes (barcode) ON DELETE CASCADE,
	session    TEXT COLLATE "C" NOT NULL,
	stream     BIGINT NOT NULL,
	point      TEXT COLLATE "C" NOT NULL,
	vm         TEXT NOT NULL DEFAULT '',
	repository TEXT NOT NULL DEFAULT '',
	point_time TIMESTAMPTZ,
	first_seq  BIGINT NOT NULL,
	last_seq   BIGINT NOT NULL,
	bytes      BIGINT NOT NULL,
	end_of_stream BOOLEAN NOT NULL DEFAULT FALSE,
	extents    TEXT NOT NULL,
	PRIMARY KEY (barcode, session, stream, first_seq)
);
CREATE INDEX media_segments_point ON media_segments (point, session, stream, first_seq);
