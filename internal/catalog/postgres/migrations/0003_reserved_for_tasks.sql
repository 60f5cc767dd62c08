-- PLACEHOLDER, not a schema change. Version 3 belongs to the tasks branch
-- (internal/task), version 4 to the access branch; the notify branch
-- (version 5) needs them to exist because migrations are numbered without
-- gaps. When merging, delete this file in favour of the real 0003 (the
-- migration test refuses two files numbered 0003, so it cannot be missed).
SELECT 1;
