-- The names of each instance's SUME_API_KEYS (never the keys themselves), written by its
-- heartbeat, so that any instance, the console and `sume-inbox stats` can tell when no running
-- instance can ask Sume anything (the sweep then neither judges the inbox nor polls), and which
-- open jobs name a key no running instance has (they would never be polled). Null: written by
-- a binary older than this migration, which says nothing about its keys. Additive only.
alter table sume.instances add column api_keys text[];
