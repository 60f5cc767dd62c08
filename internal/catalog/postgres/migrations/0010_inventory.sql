-- Schema version 10 (PostgreSQL): the VM inventory the server serves; see
-- sqlite/migrations/0010_inventory.sql for what each column means.

ALTER TABLE vms ADD COLUMN power_state TEXT NOT NULL DEFAULT '';
ALTER TABLE vms ADD COLUMN change_tracking BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE vms ADD COLUMN guest_agent BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE vms ADD COLUMN disks JSONB;
ALTER TABLE vms ADD COLUMN policies JSONB;
ALTER TABLE vms ADD COLUMN protected BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE vms ADD COLUMN busy BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX vms_listing ON vms (connection, name, id);

CREATE TABLE inventory_refresh (
	connection   TEXT COLLATE "C" PRIMARY KEY,
	refreshed_at TIMESTAMPTZ,
	attempted_at TIMESTAMPTZ NOT NULL,
	error        TEXT NOT NULL DEFAULT '',
	vms          INTEGER NOT NULL DEFAULT 0
);
