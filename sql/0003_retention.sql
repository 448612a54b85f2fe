-- Retention: what is removed after RETENTION, found by index, deleted in small batches.
-- Applied events and set-aside events age by the time they left the inbox; dead letters by
-- the time they arrived. Unapplied events that were not set aside (the inbox itself) and open
-- jobs have no such index and are never touched.

create index events_applied_at on sume.events (applied_at) where applied_at is not null;
create index events_set_aside_at on sume.events (set_aside_at)
    where set_aside_at is not null and applied_at is null;
create index dead_letters_received_at on sume.dead_letters (received_at);
create index inbox_checks_foreign on sume.inbox_checks (checked_at) where verdict = 'foreign';

-- Replaying a dead letter keeps it, marked.
alter table sume.dead_letters add column replayed_at timestamptz;
