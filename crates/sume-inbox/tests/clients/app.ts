// An application using the TypeScript client that @hey-api/openapi-ts generates from
// /v1/openapi.json (the test generates it into ./client and compiles both with tsc): it
// registers a job with the application's token, waits for its close with ?wait=, pages the
// feed of closes from a cursor, and, with the operator's token, lists the dead letters and
// replays them. Each step prints one JSON line for the test to check; any surprise throws, and
// the exit status says so.
//
// Reads SUME_INBOX_URL, SUME_INBOX_APP_TOKEN, SUME_INBOX_OPERATOR_TOKEN, JOB_ID, ORDER_ID and
// DEAD_LETTER_JOB (the job a dead letter names).

import { createClient } from './client/client';
import { getJob, listCloses, listDeadLetters, registerJob, replayDeadLetters } from './client';
import type { FeedPage, JobRow } from './client';

// Node's globals, declared here rather than brought in with @types/node.
declare const process: { env: Record<string, string | undefined>; exitCode?: number };

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

function check(ok: boolean, what: string, detail?: unknown): void {
  if (!ok) throw new Error(`${what}: ${JSON.stringify(detail)}`);
}

function say(step: string, fields: Record<string, unknown>): void {
  console.log(JSON.stringify({ step, ...fields }));
}

const baseUrl = env('SUME_INBOX_URL');
const app = createClient({ baseUrl, auth: env('SUME_INBOX_APP_TOKEN') });
const operator = createClient({ baseUrl, auth: env('SUME_INBOX_OPERATOR_TOKEN') });
const jobId = env('JOB_ID');

/** GET /v1/jobs/{job_id}?wait=30s until the job is no longer open. */
async function waitClosed(job: string): Promise<[JobRow, string | null]> {
  for (;;) {
    const r = await getJob({ client: app, path: { job_id: job }, query: { wait: '30s' } });
    check(r.response.status === 200 && r.data !== undefined, 'get_job', r.error);
    if (r.data!.state !== 'open') return [r.data!, r.response.headers.get('x-wait-outcome')];
  }
}

async function feedUntil(job: string): Promise<[string[], number, string]> {
  // Two closes a page; a short page means caught up for now, so read again from the same
  // cursor until this job's close has come (a close whose transaction ends late comes late).
  let cursor = '0';
  const seen: string[] = [];
  let pages = 0;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await listCloses({ client: app, query: { after: cursor, limit: 2 } });
    check(r.data !== undefined, 'list_closes', r.error);
    const page: FeedPage = r.data!;
    if (page.closes.length > 0) pages += 1;
    seen.push(...page.closes.map((c) => c.job_id));
    cursor = page.next_cursor;
    if (page.closes.length < 2) {
      if (seen.includes(job)) return [seen, pages, cursor];
      check(Date.now() < deadline, `the feed never brought ${job}`, seen);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

async function main(): Promise<void> {
  const reg = await registerJob({
    client: app,
    body: { job_id: jobId, order_id: env('ORDER_ID') },
  });
  check(reg.response.status === 201 && reg.data !== undefined, 'register_job', reg.error);
  say('registered', { job_id: reg.data!.job_id, state: reg.data!.state });

  const [job, outcome] = await waitClosed(jobId);
  say('closed', { state: job.state, closed_by: job.closed_by, outcome });

  const [jobs, pages, cursor] = await feedUntil(jobId);
  say('feed', { jobs, pages, cursor });

  const refused = await listDeadLetters({ client: app });
  check(refused.response.status === 403 && refused.error !== undefined, 'refused', refused.data);
  say('refused', { status: refused.response.status, code: refused.error!.error.code });

  const letters = await listDeadLetters({ client: operator, query: { limit: 100 } });
  check(letters.data !== undefined, 'list_dead_letters', letters.error);
  const replayed = await replayDeadLetters({ client: operator, body: { limit: 100 } });
  check(replayed.data !== undefined, 'replay_dead_letters', replayed.error);
  const [closed] = await waitClosed(env('DEAD_LETTER_JOB'));
  say('replayed', {
    letters: letters.data!.dead_letters.map((d) => d.dead_letter_id),
    results: replayed.data!.replayed.map((x) => x.result),
    job_state: closed.state,
  });
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
