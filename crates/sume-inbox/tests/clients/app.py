"""An application using the Python client that openapi-python-client generates from
/v1/openapi.json (the test generates it as `sume_inbox_client`): it registers a job with the
application's token, waits for its close with ?wait=, pages the feed of closes from a cursor,
and, with the operator's token, lists the dead letters and replays them. Each step prints one
JSON line for the test to check; any surprise raises, and the exit status says so.

Reads SUME_INBOX_URL, SUME_INBOX_APP_TOKEN, SUME_INBOX_OPERATOR_TOKEN, JOB_ID, ORDER_ID and
DEAD_LETTER_JOB (the job a dead letter names).
"""

import json
import os
import time

from sume_inbox_client import AuthenticatedClient
from sume_inbox_client.api.application import get_job, list_closes, register_job
from sume_inbox_client.api.operator import list_dead_letters, replay_dead_letters
from sume_inbox_client.models import (
    DeadLetterPage,
    ErrorBody,
    FeedPage,
    JobRow,
    Registration,
    ReplayDeadLetters,
    ReplayedList,
)

url = os.environ["SUME_INBOX_URL"]
app = AuthenticatedClient(base_url=url, token=os.environ["SUME_INBOX_APP_TOKEN"], timeout=60.0)
operator = AuthenticatedClient(
    base_url=url, token=os.environ["SUME_INBOX_OPERATOR_TOKEN"], timeout=60.0
)
job_id = os.environ["JOB_ID"]


def say(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def wait_closed(job):
    """GET /v1/jobs/{job}?wait=30s until the job is no longer open."""
    while True:
        r = get_job.sync_detailed(job, client=app, wait="30s")
        assert r.status_code == 200 and isinstance(r.parsed, JobRow), r
        if r.parsed.state != "open":
            return r.parsed, r.headers.get("x-wait-outcome")


r = register_job.sync_detailed(
    client=app, body=Registration(job_id=job_id, order_id=os.environ["ORDER_ID"])
)
assert r.status_code == 201 and isinstance(r.parsed, JobRow), r
say("registered", job_id=r.parsed.job_id, state=r.parsed.state)

job, outcome = wait_closed(job_id)
say("closed", state=job.state, closed_by=job.closed_by, outcome=outcome)

# The feed from cursor 0, two closes a page; a short page means caught up for now, so read
# again from the same cursor until this job's close has come (a close whose transaction ends
# late comes late, never skipped).
cursor, seen, pages, deadline = "0", [], 0, time.monotonic() + 60
while True:
    page = list_closes.sync(client=app, after=cursor, limit=2)
    assert isinstance(page, FeedPage), page
    pages += 1 if page.closes else 0
    seen += [c.job_id for c in page.closes]
    cursor = page.next_cursor
    if len(page.closes) < 2:
        if job_id in seen:
            break
        assert time.monotonic() < deadline, f"the feed never brought {job_id}: {seen}"
        time.sleep(0.2)
say("feed", jobs=seen, pages=pages, cursor=cursor)

r = list_dead_letters.sync_detailed(client=app)
assert r.status_code == 403 and isinstance(r.parsed, ErrorBody), r
say("refused", status=r.status_code, code=r.parsed.error.code)

letters = list_dead_letters.sync(client=operator, limit=100)
assert isinstance(letters, DeadLetterPage), letters
replayed = replay_dead_letters.sync(client=operator, body=ReplayDeadLetters(limit=100))
assert isinstance(replayed, ReplayedList), replayed
closed, _ = wait_closed(os.environ["DEAD_LETTER_JOB"])
say(
    "replayed",
    letters=[d.dead_letter_id for d in letters.dead_letters],
    results=[x.result for x in replayed.replayed],
    job_state=closed.state,
)
