// The AI SDK example (examples/ai-sdk-agent.mjs) run against tooljournal's loopback mock
// provider `mockllm`, end to end, in process and from the command line.
//
// The mock serves a script: reply 1 is an openai-chat answer calling `append_note` twice, reply
// 2 the final text. It checks every request as the provider would (key, `model`, `stream: true`,
// the tools' shape, the history's pairing rules) and prints one line per request, with ` -> RULE`
// when one broke a rule. A small recording proxy sits between the SDK and the mock, so the test
// sees the exact bodies the SDK sent.
//
// The mock binary is needed: $TOOLJOURNAL_MOCKLLM, else $TOOLJOURNAL_BIN_DIR/mockllm, else
// <repo>/target/debug/mockllm. When it is missing the tests fail (they do not skip), naming the
// build command.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Journal, classify, rebuild } from 'tooljournal';
import { runAgent } from '../examples/ai-sdk-agent.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..', '..'); // bindings/node/test -> ../../..
const EXAMPLE = path.resolve(HERE, '..', 'examples', 'ai-sdk-agent.mjs');
const BUILD = `cd ${REPO} && cargo build -p tooljournal-mockllm`;
const KEY = 'sk-ai-sdk-test';
const MODEL = 'gpt-4o-mini';
const PROMPT = "Write two notes: 'buy milk' and 'call mom'.";
const FINAL = 'I wrote both notes: buy milk, call mom.';
const CALLS = [
  ['call_note_1', 'append_note', { text: 'buy milk' }],
  ['call_note_2', 'append_note', { text: 'call mom' }],
];
const SCRIPT = {
  expect_key: KEY,
  replies: [
    {
      format: 'openai-chat',
      reply: { answer: { calls: CALLS.map(([i, n, a]) => [i, n, JSON.stringify(a)]), stop: 'tool_use' } },
    },
    { format: 'openai-chat', reply: { answer: { text: FINAL, stop: 'end_turn' } } },
  ],
};
const REQUEST_LINE = 'openai-chat POST /v1/chat/completions';

/** The mock's binary; the calling test fails (never skips) when it is not there. */
function mockllmBinary() {
  const dir = process.env.TOOLJOURNAL_BIN_DIR || path.join(REPO, 'target', 'debug'); // as helpers.mjs, .ci/run
  const file = process.env.TOOLJOURNAL_MOCKLLM || path.join(dir, 'mockllm');
  try {
    accessSync(file, constants.X_OK);
  } catch {
    assert.fail(`the mockllm binary is missing at ${file}: build it with \`${BUILD}\` (or point $TOOLJOURNAL_MOCKLLM at one)`);
  }
  return file;
}

/** `mockllm --port 0 --script FILE` as a child process, its stdout collected line by line. */
async function startMock(script) {
  const proc = spawn(mockllmBinary(), ['--port', '0', '--script', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  const mock = { proc, lines: [], exited: false };
  readline.createInterface({ input: proc.stdout }).on('line', (l) => mock.lines.push(l));
  readline.createInterface({ input: proc.stderr }).on('line', (l) => mock.lines.push(l));
  proc.on('exit', () => (mock.exited = true));
  mock.requestLines = () => mock.lines.filter((l) => l.includes(' POST '));
  mock.waitFor = async (done, what, ms = 10_000) => {
    const deadline = Date.now() + ms;
    while (!done(mock.lines)) {
      if (mock.exited) assert.fail(`mockllm exited (${proc.exitCode}) before ${what}:\n${mock.lines.join('\n')}`);
      if (Date.now() > deadline) assert.fail(`mockllm did not print ${what}:\n${mock.lines.join('\n')}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  mock.stop = () => {
    if (!mock.exited) proc.kill('SIGKILL');
  };
  try {
    // It prints "openai-chat: base URL http://127.0.0.1:PORT/v1 (2 replies)" once listening.
    const isBase = (l) => l.startsWith('openai-chat: base URL ');
    await mock.waitFor((ls) => ls.some(isBase), 'its base URL');
    const line = mock.lines.find(isBase);
    assert.ok(line.endsWith('(2 replies)'), line);
    mock.baseURL = line.split('base URL ')[1].split(' ')[0];
  } catch (err) {
    mock.stop();
    throw err;
  }
  return mock;
}

/** Forwards each request to the mock, streaming its answer back, and records path and JSON body. */
async function startProxy(upstream) {
  const target = new URL(upstream);
  const requests = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      requests.push({ method: req.method, path: req.url, body: raw.length ? JSON.parse(raw) : null });
      const headers = { ...req.headers, host: target.host };
      delete headers.connection;
      const up = http.request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers, agent: false },
        (upRes) => {
          res.writeHead(upRes.statusCode, upRes.headers);
          upRes.pipe(res);
        },
      );
      up.on('error', (err) => {
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`proxy: ${err.message}`);
      });
      up.end(raw);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    requests,
    baseURL: `http://127.0.0.1:${server.address().port}/v1`,
    stop: () =>
      new Promise((resolve) => {
        server.closeAllConnections(); // the SDK's fetch keeps its connection alive
        server.close(() => resolve());
      }),
  };
}

/**
 * A temp dir with the script, the mock and the proxy in front of it. Torn down in `t.after`,
 * which runs even when the test times out (a `finally` after a hung await would not).
 */
async function serve(t) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tooljournal-ai-sdk-'));
  const run = { journal: path.join(dir, 'journal'), workspace: path.join(dir, 'ws') };
  t.after(async () => {
    if (run.proxy) await run.proxy.stop();
    if (run.mock) run.mock.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const script = path.join(dir, 'script.json');
  writeFileSync(script, JSON.stringify(SCRIPT));
  run.mock = await startMock(script);
  run.proxy = await startProxy(run.mock.baseURL);
  return run;
}

/** `promise`, or a failure naming `what` after `ms` (a hung step must fail the test, not stall it). */
function within(ms, what, promise) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** Everything one run of the example must have left behind. */
async function checkRun({ mock, proxy, journal, workspace }) {
  // The mock: two requests, both valid (a broken rule is printed after " -> ").
  await mock.waitFor((ls) => ls.filter((l) => l.includes(' POST ')).length >= 2, 'two requests');
  const log = mock.lines.join('\n');
  assert.deepEqual(mock.requestLines(), [REQUEST_LINE, REQUEST_LINE], log);
  assert.ok(!mock.requestLines().some((l) => l.includes(' -> ')), log);

  // The world: the notes the calls wrote, in the model's order.
  assert.equal(readFileSync(path.join(workspace, 'notes.txt'), 'utf8'), 'buy milk\ncall mom\n');

  // The journal: both calls committed, in ONE step (one model answer = one `j.step`).
  const calls = classify(journal);
  assert.deepEqual(
    calls.map((c) => [c.callId, c.tool, c.state, c.classification]),
    CALLS.map(([i, n]) => [i, n, 'committed', null]),
  );
  assert.deepEqual([...new Set(calls.map((c) => `${c.turn}/${c.step}`))], ['1/1'], JSON.stringify(calls));

  // The requests as the SDK sent them.
  assert.deepEqual(proxy.requests.map((r) => `${r.method} ${r.path}`), ['POST /v1/chat/completions', 'POST /v1/chat/completions']);
  const [first, second] = proxy.requests.map((r) => r.body);
  const rebuilt = rebuild(journal, 'openai-chat');
  const journaledTools = Object.fromEntries(rebuilt.tools.map((t) => [t.function.name, t.function.parameters]));
  for (const body of [first, second]) {
    assert.equal(body.model, MODEL);
    assert.equal(body.stream, true);
    const declared = Object.fromEntries(body.tools.map((t) => [t.function.name, t.function.parameters]));
    assert.deepEqual(declared, journaledTools); // the model is shown the schemas the journal has
    assert.deepEqual(Object.keys(declared), ['append_note']);
  }
  assert.deepEqual(first.messages.map((m) => m.role), ['user']);

  // The second request carries the assistant's calls, then each result paired with its id.
  const messages = second.messages;
  assert.deepEqual(messages.map((m) => m.role), ['user', 'assistant', 'tool', 'tool'], JSON.stringify(messages));
  assert.deepEqual(
    messages[1].tool_calls.map((tc) => [tc.id, tc.function.name, JSON.parse(tc.function.arguments)]),
    CALLS,
  );
  assert.deepEqual(
    messages.slice(2).map((m) => [m.tool_call_id, m.content]),
    [['call_note_1', 'noted buy milk'], ['call_note_2', 'noted call mom']],
  );

  // The journal's own history ends with the final answer, every call answered.
  assert.deepEqual(rebuilt.messages.at(-1), { role: 'assistant', content: FINAL });
  assert.deepEqual(
    rebuilt.messages.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id, m.content]),
    [['call_note_1', 'noted buy milk'], ['call_note_2', 'noted call mom']],
  );
}

test('runAgent runs the AI SDK agent against the mock, one journaled step per answer', { timeout: 30_000 }, async (t) => {
  const run = await serve(t);
  const { text, steps } = await within(
    20_000,
    'runAgent',
    runAgent({ baseURL: run.proxy.baseURL, apiKey: KEY, model: MODEL, journal: run.journal, workspace: run.workspace, prompt: PROMPT }),
  );
  assert.equal(text, FINAL);
  assert.equal(steps.length, 2);
  assert.deepEqual(
    steps[0].toolResults.map((r) => [r.toolCallId, r.output]),
    [['call_note_1', 'noted buy milk'], ['call_note_2', 'noted call mom']],
  );
  await checkRun(run);
  // runAgent closed the journal: it can be taken up again at once.
  await (await Journal.resume(run.journal, { rerun: null })).close();
});

test('the example from the command line prints the final answer', { timeout: 30_000 }, async (t) => {
  const run = await serve(t);
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      EXAMPLE,
      '--base-url', run.proxy.baseURL,
      '--journal', run.journal,
      '--workspace', run.workspace,
      '--model', MODEL,
      '--api-key', KEY,
      PROMPT,
    ],
    { timeout: 20_000 }, // kills a hung child: the test fails instead of stalling
  );
  assert.equal(stdout.trim().split('\n').at(-1), FINAL);
  await checkRun(run);
});
