-- Schema version 11, the same in both dialects: a backup point records how
-- the policy's application hooks around its snapshot went ('ok',
-- 'pre-failed', 'post-failed'; '' when none ran, as for rows from before).
ALTER TABLE backup_points ADD COLUMN hooks TEXT NOT NULL DEFAULT '';
