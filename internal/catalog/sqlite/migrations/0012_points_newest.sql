-- Schema version 12, the same in both dialects: the newest point's time
-- of every VM (NewestPointTimes, which the protection summary and the
-- inventory's attention order read on every visit) is one walk of this
-- covering index in its own order, instead of a scan of every point and a
-- sort of them by VM (10,000 VMs, 100,000 points: 17 ms against 71 ms in
-- SQLite's shell).
CREATE INDEX points_conn_vm ON backup_points (connection, vm_id, taken_at);
