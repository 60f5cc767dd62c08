-- Schema version 13, the same in both dialects: a repository's points
-- page (newest first, 50 at a time, after a cursor) walks this index from
-- its cursor, in the page's order, and stops after 50 rows. Without it
-- SQLite took the primary key (repository, id) for the repository's
-- equality and sorted every point of the repository for each page.
CREATE INDEX points_repository ON backup_points (repository, taken_at, id);
