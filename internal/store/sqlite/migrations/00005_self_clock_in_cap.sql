-- The self clock-in cap and its ledger (design: Self clock-in cap), SQLite dialect:
-- self_clock_in_cap is the owner's cap in seconds (default 8 h, 0 = the
-- agent may not clock itself in outside its shift); self_in_stretch (unix
-- microseconds, UTC) is the end of the off-shift stretch self_in_used
-- (seconds) counts.

-- +goose Up
ALTER TABLE agents ADD COLUMN self_clock_in_cap INTEGER NOT NULL DEFAULT 28800 CHECK (self_clock_in_cap >= 0);
ALTER TABLE agents ADD COLUMN self_in_stretch INTEGER;
ALTER TABLE agents ADD COLUMN self_in_used INTEGER NOT NULL DEFAULT 0 CHECK (self_in_used >= 0);

-- +goose Down
ALTER TABLE agents DROP COLUMN self_in_used;
ALTER TABLE agents DROP COLUMN self_in_stretch;
ALTER TABLE agents DROP COLUMN self_clock_in_cap;
