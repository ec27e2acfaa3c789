-- Shared failure windows (design: Limits shared by instances), PostgreSQL
-- dialect: the failed-authentication limit and the per-hook failed-signature
-- limit count in this table, so every instance on one database spends one
-- budget. One row per key (a client address, a credential prefix, a hook):
-- the start of its current fixed window and the failures counted in it.
-- SQLite serves one instance and counts in process.
--
-- UNLOGGED: a count writes no WAL and waits for no flush (a counted failure
-- costs one round trip, not a disk sync). After a crash PostgreSQL empties
-- the table, and standbys do not have it: a limit then starts counting
-- afresh, which only forgives failures of the last minute.

-- +goose Up
CREATE UNLOGGED TABLE rate_windows (
    key          text PRIMARY KEY,
    window_start timestamptz NOT NULL,
    count        integer NOT NULL
);
CREATE INDEX rate_windows_age ON rate_windows (window_start);

-- +goose Down
DROP TABLE rate_windows;
