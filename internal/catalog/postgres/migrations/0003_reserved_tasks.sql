-- Placeholder for schema version 3, which the tasks branch (internal/task)
-- owns. It keeps the numbering without gaps on the access branch (0004)
-- until the two are merged; the merge replaces this file with the tasks
-- migration. It changes nothing.
SELECT 1;
