-- Statements on sume.job_polls: each job's latest status calls, a ring of 20 slots per job
-- (sql/0010_job_polls.sql).

-- name: job_polls_insert
-- One poll pass's batch of status calls in one statement: job $1, key $2, answer $3, latency
-- $4 (ms), made $5 seconds before the clock ($6, or the database's when null). A call takes
-- the job's next seq and the slot seq % 20, replacing the call 20 before it, so a job keeps its
-- latest 20 (at most 20 calls per job per statement: the caller keeps a job's latest). A job
-- whose row is gone is skipped (a lookup of its key per call: `offset 0` keeps it a subplan,
-- never a join that could read sume.jobs whole). The seq guard keeps a newer call from being
-- overwritten by an older one if two instances ever polled one job at once (an expired lease).
insert into sume.job_polls as p (job_id, slot, seq, polled_at, key_name, answer, latency_ms)
select u.job_id,
       ((coalesce(h.seq, 0) + u.n) % 20)::smallint,
       coalesce(h.seq, 0) + u.n,
       coalesce($6, now()) - make_interval(secs => u.ago_secs),
       u.key_name,
       u.answer,
       u.latency_ms
from (select x.*, row_number() over (partition by x.job_id order by x.ord) as n
      from unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::float8[])
           with ordinality as x(job_id, key_name, answer, latency_ms, ago_secs, ord)) u
cross join lateral (select max(seq) as seq from sume.job_polls where job_id = u.job_id) h
where exists (select 1 from sume.jobs j where j.job_id = u.job_id offset 0)
on conflict (job_id, slot) do update
set seq        = excluded.seq,
    polled_at  = excluded.polled_at,
    key_name   = excluded.key_name,
    answer     = excluded.answer,
    latency_ms = excluded.latency_ms
where p.seq < excluded.seq;
