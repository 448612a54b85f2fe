-- index concurrently: sume.jobs_order_id
-- Finding a job by the application's order id (the console's search, `GET /v1/jobs?order_id=`)
-- reads this index instead of every job, in job id order for its pages. Built concurrently,
-- outside a transaction, so a running fleet keeps writing sume.jobs while it builds; a build
-- cut short leaves an invalid index, which the next `migrate` drops and builds again.
create index concurrently if not exists jobs_order_id on sume.jobs (order_id, job_id)
    where order_id is not null
