-- index concurrently: sume.events_awaiting
-- The waiting events still worth a look: not applied, not set aside, not marked as an orphan's
-- (migration 13). The catch-up scan walks it oldest first, so its cost is the events it finds
-- plus the jobless ones younger than INBOX_GRACE (the sweep marks or sets aside the older
-- ones), never the orphans kept. Built concurrently: sume.events is the largest table, and a
-- plain build would hold every ingest insert until it ends.
create index concurrently if not exists events_awaiting on sume.events (received_at)
    where applied_at is null and set_aside_at is null and orphaned_at is null
