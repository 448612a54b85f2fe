-- The feed of closes: one row per close of a job, written by the closing transaction itself,
-- whatever closed it (an attached webhook, a poll, a give-up, a replay) and whichever binary
-- did, so an older instance running beside a newer one on this schema feeds it too.
--
-- Its order is (xid, seq): the closing transaction's id, then the order of its inserts. A
-- reader returns only rows whose transaction id is below the xmin of its own snapshot, i.e.
-- rows of transactions that have ended (committed, or aborted and never seen). A transaction
-- still open has an id at or above that xmin, so whatever it writes later sorts after every
-- row already returned: a cursor can never pass a position a later commit could fill. The
-- price: while any transaction that holds an id stays open (anywhere in the cluster, since
-- ids are the cluster's), the feed stops at it; closes after it wait, and none is lost.
-- Closes made before this migration are not in the feed (the jobs list has them).

create table sume.job_closes (
    xid                xid8 not null default pg_current_xact_id(),
    seq                bigint generated always as identity,
    job_id             text not null,
    state              text not null,
    closed_by          text not null,
    -- This close replaced a give-up (closed_by was 'give_up'): the job's state may change.
    supersedes_give_up boolean not null default false,
    closed_at          timestamptz not null,
    primary key (xid, seq)
);
-- Retention: old entries by the time they were written.
create index job_closes_closed_at on sume.job_closes (closed_at);

-- A close, and a give-up superseded by Sume's own terminal status, each become one feed row,
-- and wake every listener of sume_job_closed with the job id only (a payload is capped at
-- 8000 bytes; job ids at 255). The notification is delivered when the close commits; the
-- feed stays the truth, a listener reads it after each wake-up.
-- security definer: the row is written with the rights of the schema's owner, so a runtime
-- role granted before this migration keeps closing jobs until its grants are renewed.
create function sume.jobs_closed() returns trigger language plpgsql
    security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into sume.job_closes (job_id, state, closed_by, supersedes_give_up, closed_at)
    values (new.job_id, new.state, new.closed_by,
            old.state <> 'open' and old.closed_by = 'give_up', new.closed_at);
    perform pg_notify('sume_job_closed', new.job_id);
    return null;
end
$$;

create trigger jobs_closed after update on sume.jobs
    for each row
    when ((old.state = 'open' and new.state <> 'open')
          or (old.closed_by = 'give_up' and new.closed_by is distinct from 'give_up'))
    execute function sume.jobs_closed();
