-- Events that never find their job: an orphan's (a key of ours reads the job, yet no row was
-- ever committed) and, without SUME_API_KEYS, every event nobody can ask about. They used to
-- wait in the inbox for ever, and every catch-up scan walked them on its way to the events
-- that do have a row. From this version the sweep marks them once it knows they have no row to
-- wait for (orphaned_at); the catch-up scan and the inbox checks read an index that leaves
-- them out (events_awaiting, migration 16); a registration clears its job's marks (below), so
-- they attach as before; and after ORPHAN_RETENTION retention moves every event still without
-- a row to sume.dead_letters.
--
-- Additive: a binary older than this version never reads the column and treats a marked event
-- as a waiting one, as it always did; its registrations clear the marks too (the trigger).
alter table sume.events add column orphaned_at timestamptz;

-- A registration clears the marks of its job's waiting events, in the registering transaction
-- (the application's own insert, POST /v1/jobs, any binary), so the catch-up scan finds them
-- again should the registration's notification be missed. One probe of events_job_id per new
-- job. security definer, as sume.jobs_closed (migration 7): a role that may only insert jobs
-- registers them as before.
create function sume.jobs_unmark_orphans() returns trigger language plpgsql
    security definer set search_path = pg_catalog, pg_temp as $$
begin
    update sume.events
    set orphaned_at = null
    where job_id = new.job_id
      and applied_at is null
      and orphaned_at is not null;
    return null;
end
$$;

create trigger jobs_unmark_orphans after insert on sume.jobs
    for each row execute function sume.jobs_unmark_orphans();
