-- The benchmark's statements on sume.job_polls.

-- name: job_polls_between
-- The chaos suite's Sume black hole: the status calls made from $1 to $2 (texts,
-- timestamptz) by answer, with their shortest and longest time.
select answer, count(*), min(latency_ms)::int8, max(latency_ms)::int8
from sume.job_polls
where polled_at >= $1::text::timestamptz and polled_at < $2::text::timestamptz
group by answer;
