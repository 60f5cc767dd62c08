-- Schema version 10 (SQLite): the VM inventory the server serves. A
-- background refresher per connection lists its VMs and replaces the
-- connection's rows of vms in one transaction; /vms reads them a page at
-- a time by (connection, name, id), so that listing a fleet of 10,000 VMs
-- never waits for a hypervisor. policies and protected are what the
-- configuration selected at the refresh (a filter of the listing); busy
-- marks a VM its connection could not describe at the last refresh (a
-- backup held its monitor): the row is its last known state.
-- inventory_refresh holds, per connection, when it was last listed
-- successfully, when last tried, and the last try's error ('' when it
-- succeeded). postgres/migrations/0010_inventory.sql is the same schema
-- in PostgreSQL types.

ALTER TABLE vms ADD COLUMN power_state TEXT NOT NULL DEFAULT '';
ALTER TABLE vms ADD COLUMN change_tracking INTEGER NOT NULL DEFAULT 0;
ALTER TABLE vms ADD COLUMN guest_agent INTEGER NOT NULL DEFAULT 0;
ALTER TABLE vms ADD COLUMN disks TEXT;
ALTER TABLE vms ADD COLUMN policies TEXT;
ALTER TABLE vms ADD COLUMN protected INTEGER NOT NULL DEFAULT 0;
ALTER TABLE vms ADD COLUMN busy INTEGER NOT NULL DEFAULT 0;
CREATE INDEX vms_listing ON vms (connection, name, id);

CREATE TABLE inventory_refresh (
	connection   TEXT PRIMARY KEY,
	refreshed_at INTEGER,
	attempted_at INTEGER NOT NULL,
	error        TEXT NOT NULL DEFAULT '',
	vms          INTEGER NOT NULL DEFAULT 0
);
