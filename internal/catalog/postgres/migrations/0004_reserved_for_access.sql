-- PLACEHOLDER, not a schema change. Version 4 belongs to the access branch
-- (internal/auth), version 3 to the tasks branch; the notify branch
-- (version 5) needs them to exist because migrations are numbered without
-- gaps. When merging, delete this file in favour of the real 0004 (the
-- migration test refuses two files numbered 0004, so it cannot be missed).
SELECT 1;
