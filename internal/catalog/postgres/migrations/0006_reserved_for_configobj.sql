-- PLACEHOLDER, not a schema change. Version 6 belongs to the configobj
-- branch (configuration objects in the catalog); the ops branch (version
-- 7) needs it to exist because migrations are numbered without gaps. When
-- merging, delete this file in favour of the real 0006 (the migration test
-- refuses two files numbered 0006, so it cannot be missed).
SELECT 1;
