-- Schema version 2, the same in both dialects: a backup point records the
-- snapshot mode it asked for and the one it achieved (a quiesce fallback
-- is crash-consistent), a task the achieved mode of its point. Rows from
-- before keep '' (not recorded).
ALTER TABLE backup_points ADD COLUMN snapshot_mode TEXT NOT NULL DEFAULT '';
ALTER TABLE backup_points ADD COLUMN snapshot_mode_achieved TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN snapshot_mode_achieved TEXT NOT NULL DEFAULT '';
