// One graphile-worker measurement, run by graphile_worker.sh (which see); not
// meant to be run by hand.
//
//   node graphile_worker.mjs GW_DIR DATABASE_URL BACKLOG CONCURRENCY MODE
//
// GW_DIR holds node_modules/graphile-worker; DATABASE_URL names a fresh, empty
// database; MODE is `default` or `batched`. Installs the schema (runMigrations),
// adds BACKLOG jobs of the no-op task `noop` through SQL
// (`graphile_worker.add_jobs`, 10,000 a statement), then runs a worker pool of
// CONCURRENCY on them until the jobs table is empty. Prints one line:
//   JOBS_PER_S RUN_LOAD ADD_JOBS_PER_S ADD_LOAD
// where JOBS_PER_S is BACKLOG over the time from the first `job:complete` event
// to the moment a query found no job left in the table (`job:complete` is
// emitted before the completion is written, so the end is taken from the table),
// and the loads are the 1-minute load average at the end of each phase.
// Exits non-zero, saying why, unless every job succeeded and the table is empty.
import { createRequire } from "node:module";
import { EventEmitter } from "node:events";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const [gwDir, url, backlogArg, concurrencyArg, mode] = process.argv.slice(2);
const N = Number(backlogArg);
const C = Number(concurrencyArg);
if (!gwDir || !url || !(N > 0) || !(C > 0) || !["default", "batched"].includes(mode)) {
  console.error("usage: graphile_worker.mjs GW_DIR DATABASE_URL BACKLOG CONCURRENCY default|batched");
  process.exit(2);
}
const require = createRequire(join(gwDir, "package.json"));
const { run, runMigrations, Logger } = require("graphile-worker");
const { Client } = require("pg");

const load = () => readFileSync("/proc/loadavg", "utf8").split(" ")[0];
const fail = (message) => {
  console.error(`graphile-worker ${mode}, backlog ${N}, concurrency ${C}: ${message}`);
  process.exit(1);
};

// Quiet: a logger that drops everything (graphile-worker still formats its
// debug messages; NO_LOG_SUCCESS, set by the caller, spares the success one).
const logger = new Logger(() => () => {});
// The option's documentation recommends max(10, concurrency + 2) connections;
// its default (10) is below 16 and graphile-worker warns about that.
const maxPoolSize = Math.max(10, C + 2);
const batching =
  mode === "batched"
    ? { localQueue: { size: Math.max(500, C + 1) }, completeJobBatchDelay: 0, failJobBatchDelay: 0 }
    : {};

await runMigrations({ preset: { worker: { connectionString: url, logger } } });

const client = new Client({ connectionString: url });
await client.connect();
const CHUNK = 10000;
let t = performance.now();
for (let from = 1; from <= N; from += CHUNK) {
  const to = Math.min(from + CHUNK - 1, N);
  await client.query(
    `SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(
       SELECT ROW('noop', json_build_object('id', 'p' || i, 'cents', i),
                  NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec
       FROM generate_series($1::int, $2::int) AS i))`,
    [from, to],
  );
}
const addRate = N / ((performance.now() - t) / 1000);
const addLoad = load();
const queued = Number((await client.query("SELECT count(*) FROM graphile_worker._private_jobs")).rows[0].count);
if (queued !== N) fail(`${queued} jobs queued, ${N} expected`);

const events = new EventEmitter();
const STALL_MS = 60000;
let completed = 0;
let errors = 0;
let first = null;
let lastError = null;
let progressAt = performance.now();
let settle;
const settled = new Promise((resolve) => (settle = resolve));
events.on("job:complete", ({ error }) => {
  const now = performance.now();
  if (first === null) first = now;
  progressAt = now;
  completed++;
  if (error) {
    errors++;
    lastError = error;
    settle();
  }
  if (completed === N) settle();
});
events.on("pool:fatalError", ({ error }) => fail(`pool fatal error: ${error}`));
// Give up after STALL_MS without a completion (a timer, no query).
const stall = setInterval(() => {
  if (performance.now() - progressAt > STALL_MS) settle();
}, 1000);

const runner = await run({
  noHandleSignals: true,
  taskList: { noop: async () => {} },
  parsedCronItems: [],
  preset: {
    worker: { connectionString: url, concurrentJobs: C, maxPoolSize, logger, events, ...batching },
  },
});

// Wait for N `job:complete` events, or a failure, or a stall.
await settled;
clearInterval(stall);
// Then for the completions to be written: poll the table, only now.
let end = null;
if (errors === 0 && completed >= N) {
  const deadline = performance.now() + STALL_MS;
  while (performance.now() < deadline) {
    const { rows } = await client.query("SELECT EXISTS (SELECT 1 FROM graphile_worker._private_jobs) AS any_left");
    if (!rows[0].any_left) {
      end = performance.now();
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}
const runLoad = load();
await runner.stop();
await runner.promise.catch(() => {});
const remaining = Number((await client.query("SELECT count(*) FROM graphile_worker._private_jobs")).rows[0].count);
await client.end();

if (errors > 0) fail(`${errors} job(s) failed, e.g. ${lastError}`);
if (completed !== N) fail(`${completed} jobs completed of ${N} (no progress for ${STALL_MS / 1000} s)`);
if (end === null || remaining !== 0) fail(`${remaining} jobs left in graphile_worker._private_jobs`);
const span = (end - first) / 1000;
console.log(`${Math.round(N / span)} ${runLoad} ${Math.round(addRate)} ${addLoad}`);
