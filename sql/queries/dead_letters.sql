-- Statements on sume.dead_letters: verified deliveries whose body names no job.

-- name: dead_letters_insert
insert into sume.dead_letters (dead_letter_id, reason, body, header_event_id, signed_at, signature)
select *
from unnest($1::text[], $2::text[], $3::bytea[], $4::text[], $5::int8[], $6::text[])
on conflict (dead_letter_id) do nothing;
