-- Statements on sume.job_closes, the feed of closes (0007_close_feed.sql): written only by the
-- trigger sume.jobs_closed, read in (xid, seq) order.

-- name: job_closes_after
-- Up to $3 entries after the cursor ($1 the transaction id, $2 the sequence), oldest first,
-- with the job's order and result. Only entries of transactions below the xmin of this
-- statement's snapshot: every one of them has ended, so no entry can later appear before the
-- last one answered. The join keeps the entry of a job whatever it became since.
select c.xid::text::bigint as xid, c.seq, c.job_id, c.state, c.closed_by,
       c.supersedes_give_up, c.closed_at, j.order_id, j.api_key,
       j.result::text as result
from sume.job_closes c
join sume.jobs j on j.job_id = c.job_id
where (c.xid, c.seq) > ($1::bigint::text::xid8, $2::bigint)
  and c.xid < pg_snapshot_xmin(pg_current_snapshot())
order by c.xid, c.seq
limit $3;

-- name: job_closes_cursor_ahead
-- Whether the cursor's transaction id ($1) is at or past the next one this database will
-- assign: no close was ever written under it here (a cursor of another database, or saved
-- before a restore).
select $1::bigint::text::xid8 >= pg_snapshot_xmax(pg_current_snapshot()) as ahead;

-- name: job_closes_delete_old
-- Retention: up to $2 entries older than $1 seconds before the clock ($3, or the database's).
delete from sume.job_closes
where (xid, seq) in (select xid, seq from sume.job_closes
                     where closed_at < coalesce($3, now()) - make_interval(secs => $1)
                     limit $2);

-- name: job_closes_listen
-- The trigger sume.jobs_closed sends each closed job's id on this channel.
listen sume_job_closed;
