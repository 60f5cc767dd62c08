-- Schema version 13 (PostgreSQL): sqlite/migrations/0013_media_worm.sql
-- in native types.
ALTER TABLE media_volumes ADD COLUMN worm BOOLEAN NOT NULL DEFAULT FALSE;
