-- The self clock-in cap and its ledger (design: Self clock-in cap), PostgreSQL
-- dialect: self_clock_in_cap is the owner's cap in seconds (default 8 h,
-- 0 = the agent may not clock itself in outside its shift); self_in_stretch
-- is the end of the off-shift stretch self_in_used (seconds) counts.

-- +goose Up
ALTER TABLE agents
    ADD COLUMN self_clock_in_cap bigint NOT NULL DEFAULT 28800 CHECK (self_clock_in_cap >= 0),
    ADD COLUMN self_in_stretch   timestamptz,
    ADD COLUMN self_in_used      bigint NOT NULL DEFAULT 0 CHECK (self_in_used >= 0);

-- +goose Down
ALTER TABLE agents
    DROP COLUMN self_in_used,
    DROP COLUMN self_in_stretch,
    DROP COLUMN self_clock_in_cap;
