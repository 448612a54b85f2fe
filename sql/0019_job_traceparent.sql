-- The W3C `traceparent` of the application's `POST /v1/jobs`, when it sent one: the job's
-- close, traced, links to that trace. Nullable, no default: adding it rewrites nothing.
alter table sume.jobs add column traceparent text;
