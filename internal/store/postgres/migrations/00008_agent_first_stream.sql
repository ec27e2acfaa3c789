-- When an agent first opened a notification stream (design: Connect and reconnect digests): the
-- first connection ever gets a digest with reason "connect", later ones
-- "reconnect". PostgreSQL dialect; NULL = never.

-- +goose Up
ALTER TABLE agents ADD COLUMN first_stream_at timestamptz;

-- +goose Down
ALTER TABLE agents DROP COLUMN first_stream_at;
