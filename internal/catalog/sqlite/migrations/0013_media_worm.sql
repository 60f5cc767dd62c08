-- Schema version 13 (SQLite): whether a volume's cartridge is WORM, as
-- the library or the drive reported it (a volume written once and never
-- overwritten, whatever its retention says). postgres/migrations/
-- 0013_media_worm.sql is the same in PostgreSQL types.
ALTER TABLE media_volumes ADD COLUMN worm INTEGER NOT NULL DEFAULT 0;
