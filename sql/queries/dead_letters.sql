-- Statements on sume.dead_letters: verified deliveries whose body names no job.

-- name: dead_letters_insert
-- Keyed by the body's hash. A row stored before 0004_signed_keys was keyed by the header's id:
-- a delivery whose header id names such a row is a redelivery of it, and is not kept twice.
insert into sume.dead_letters (dead_letter_id, reason, body, header_event_id, signed_at, signature)
select u.dead_letter_id, u.reason, u.body, u.header_event_id, u.signed_at, u.signature
from unnest($1::text[], $2::text[], $3::bytea[], $4::text[], $5::int8[], $6::text[])
     as u(dead_letter_id, reason, body, header_event_id, signed_at, signature)
where u.header_event_id is null
   or not exists (
        select 1 from sume.dead_letters legacy
        where legacy.dead_letter_id = u.header_event_id
          and legacy.received_at < (select applied_at from sume.schema_migrations
                                    where version = 4))
on conflict (dead_letter_id) do nothing;

-- name: dead_letters_list
select dead_letter_id, reason, header_event_id, length(body) as bytes, received_at, replayed_at
from sume.dead_letters
order by received_at desc
limit $1;

-- name: dead_letters_pending
-- Dead letters not replayed yet, oldest first, with what replay needs: keyset-paged in
-- (received_at, dead_letter_id) order after ($1, $2) (null: from the first), at most $3.
select dead_letter_id, reason, body, header_event_id, signed_at, signature, received_at
from sume.dead_letters
where replayed_at is null
  and ($1::timestamptz is null or (received_at, dead_letter_id) > ($1, $2::text))
order by received_at, dead_letter_id
limit $3;

-- name: dead_letters_drop
-- An operator's decision: these dead letters are not wanted. Answers the ids removed.
delete from sume.dead_letters
where dead_letter_id = any($1)
returning dead_letter_id;

-- name: dead_letters_mark_replayed
update sume.dead_letters
set replayed_at = now()
where dead_letter_id = $1
  and replayed_at is null;

-- name: dead_letters_delete_expired
-- Retention (see db/retention.rs): at most $2 rows older than $1 seconds by the clock ($3, or
-- the database's when null), in its own short transaction, so no lock is held for long and
-- ingest never waits behind it.
delete from sume.dead_letters
where dead_letter_id = any (array(
    select dead_letter_id from sume.dead_letters
    where received_at < coalesce($3, now()) - make_interval(secs => $1)
    order by received_at
    limit $2));

-- name: dead_letters_page
-- Newest first, keyset-paged in (received_at, dead_letter_id) descending order after ($1, $2)
-- (null: from the newest), at most $3.
select dead_letter_id, reason, header_event_id, length(body) as bytes, received_at, replayed_at
from sume.dead_letters
where $1::timestamptz is null or (received_at, dead_letter_id) < ($1, $2::text)
order by received_at desc, dead_letter_id desc
limit $3;

-- name: dead_letters_console_page
-- The console's page of dead letters: the newest $1, each with the first 8 KiB of its body.
select dead_letter_id, reason, header_event_id, length(body) as bytes, received_at, replayed_at,
       substring(body from 1 for 8192) as body_head
from sume.dead_letters
order by received_at desc, dead_letter_id desc
limit $1;
