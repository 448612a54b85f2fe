-- What operators did: every write of the admin API's operator routes and of the CLI (replay,
-- dropping dead letters), who did it, when, with the request it came from. Only inserted,
-- never updated; read newest first.
create table sume.audit_log (
    id         bigint generated always as identity primary key,
    at         timestamptz not null default now(),
    -- `api:operator` (with X-Actor when given), or `cli:<user>@<host>`.
    actor      text not null,
    -- `replay_event`, `replay_dead_letters`, `drop_dead_letters`.
    action     text not null,
    -- What it acted on (an event id, the dead letters' ids) and what came of it.
    detail     jsonb not null,
    request_id text
);
