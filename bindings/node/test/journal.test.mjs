// The package's contract, through the package: tools, turns, steps, results, history, errors,
// the user's stop, two processes on one journal.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import * as tj from '../index.mjs';
import { spawnSync } from 'node:child_process';
import { PACKAGE, binary, recoverRebuild, run, scratch, startChild, waitUntil } from './helpers.mjs';

const { Journal, classify, rebuild, audit, FORMATS } = tj;
const NOTE_SCHEMA = { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] };
const notes = (...texts) => texts.map((t, i) => ({ id: `c${i + 1}`, name: 'append_note', arguments: JSON.stringify({ text: t }) }));

test('a step journals every call and answers in model order, each with its own key', async (t) => {
  const { ws, journal } = scratch(t);
  const seen = [];
  const j = await Journal.create(journal, { workspace: ws });
  j.tool(
    'append_note',
    async (args, ctx) => {
      seen.push([ctx.callId, ctx.idempotencyKey, ctx.attempt, ctx.signal.aborted]);
      fs.appendFileSync(path.join(ws, 'notes.txt'), `${args.text}\n`);
      return { noted: args.text };
    },
    { schema: NOTE_SCHEMA },
  );
  assert.equal(j.turn('note three things'), 1);
  const results = await j.step(notes('a', 'b', 'c'));
  assert.deepEqual(results.map((r) => r.callId), ['c1', 'c2', 'c3']);
  assert.ok(results.every((r) => r.ok && r.code === null));
  assert.deepEqual(JSON.parse(results[1].content), { noted: 'b' });
  assert.equal(fs.readFileSync(path.join(ws, 'notes.txt'), 'utf8'), 'a\nb\nc\n');
  assert.deepEqual(seen.map((s) => s[0]), ['c1', 'c2', 'c3']);
  assert.ok(seen.every((s) => s[2] === 1 && s[3] === false));
  assert.equal(new Set(seen.map((s) => s[1])).size, 3);
  await j.close();
  // The journal's own record of the keys is the one the bodies were given.
  const audited = Object.fromEntries(audit(journal).calls.map((c) => [c.call_id, c.idempotency_key]));
  assert.deepEqual(seen.map((s) => audited[s[0]]), seen.map((s) => s[1]));
});

test('started is durable before the body: another reader sees it from inside', async (t) => {
  const { ws, journal } = scratch(t);
  const j = await Journal.create(journal, { workspace: ws });
  const inBody = [];
  j.tool('probe_tool', (args, ctx) => {
    inBody.push(...classify(journal).filter((c) => c.callId === ctx.callId).map((c) => c.state));
    return 'ok';
  });
  j.turn('look');
  await j.step([{ id: 'p1', name: 'probe_tool', arguments: '{}' }]);
  await j.close();
  assert.deepEqual(inBody, ['started']);
  const [call] = audit(journal).calls;
  assert.equal(call.state, 'committed');
});

test('a tool that throws is a failed call with its message, and the batch goes on', async (t) => {
  const { ws, journal } = scratch(t);
  const j = await Journal.create(journal, { workspace: ws });
  const ran = [];
  j.tool('boom', () => {
    ran.push('boom');
    throw new Error('disk full');
  });
  j.tool('reject', async () => {
    ran.push('reject');
    throw new TypeError('no such account');
  });
  j.tool('ok', () => {
    ran.push('ok');
    return 'fine';
  });
  j.turn('try things');
  const results = await j.step([
    { id: 'b', name: 'boom' },
    { id: 'r', name: 'reject' },
    { id: 'missing', name: 'no_such_tool' },
    { id: 'o', name: 'ok' },
  ]);
  assert.deepEqual(
    results.map((r) => [r.callId, r.ok, r.code, r.content]),
    [
      ['b', false, 'TOOL_FAILED', 'TOOL_FAILED: disk full'],
      ['r', false, 'TOOL_FAILED', 'TOOL_FAILED: no such account'],
      ['missing', false, 'UNKNOWN_TOOL', results[2].content],
      ['o', true, null, 'fine'],
    ],
  );
  assert.match(results[2].content, /^UNKNOWN_TOOL: /);
  assert.deepEqual(ran, ['boom', 'reject', 'ok']);
  await j.close();
  assert.deepEqual(classify(journal).map((c) => c.state), ['committed', 'committed', 'committed', 'committed']);
});

test('a retryable failure of an idempotent tool is retried with the same key', async (t) => {
  const { ws, journal } = scratch(t);
  const j = await Journal.create(journal, { workspace: ws });
  const attempts = [];
  j.tool(
    'fetch_quote',
    (args, ctx) => {
      attempts.push([ctx.attempt, ctx.idempotencyKey]);
      if (ctx.attempt === 1) throw new tj.RetryableError('rate limited');
      return 'quote';
    },
    { idempotent: true, readOnly: true },
  );
  j.tool('once', (args, ctx) => {
    attempts.push(['once', ctx.attempt]);
    throw new tj.RetryableError('not idempotent: no retry');
  });
  j.turn('quote');
  const [quote, once] = await j.step([
    { id: 'q', name: 'fetch_quote' },
    { id: 'n', name: 'once' },
  ]);
  await j.close();
  assert.equal(quote.content, 'quote');
  assert.deepEqual(attempts.filter((a) => a[0] !== 'once').map((a) => a[0]), [1, 2]);
  assert.equal(attempts[0][1], attempts[1][1]);
  assert.deepEqual(attempts.filter((a) => a[0] === 'once'), [['once', 1]]);
  assert.equal(once.code, 'TOOL_FAILED');
});

test('tools that may overlap run at once; results stay in model order', async (t) => {
  const { ws, journal } = scratch(t);
  const j = await Journal.create(journal, { workspace: ws });
  // Each body waits until both have started: only running together can they finish.
  let started = 0;
  let release;
  const both = new Promise((r) => (release = r));
  const body = async (args) => {
    started += 1;
    if (started === 2) release();
    await Promise.race([both, new Promise((_, no) => setTimeout(() => no(new Error('ran alone')), 10_000))]);
    return `read ${args.path}`;
  };
  j.tool('read_a', body, { readOnly: true });
  j.tool('read_b', body, { readOnly: true });
  j.turn('read both');
  const results = await j.step([
    { id: 'ra', name: 'read_a', arguments: { path: 'a' } },
    { id: 'rb', name: 'read_b', arguments: { path: 'b' } },
  ]);
  await j.close();
  assert.deepEqual(results.map((r) => [r.callId, r.content]), [['ra', 'read a'], ['rb', 'read b']]);
});

test('step takes each provider\'s raw response', async (t) => {
  const { ws, journal } = scratch(t);
  const j = await Journal.create(journal, { workspace: ws });
  const got = [];
  j.tool('append_note', (args, ctx) => {
    got.push([ctx.callId, args.text]);
    return 'ok';
  }, { schema: NOTE_SCHEMA });
  const responses = [
    { id: 'chatcmpl-1', object: 'chat.completion', choices: [{ index: 0, finish_reason: 'tool_calls', message: { role: 'assistant', content: null, tool_calls: [{ id: 'oa1', type: 'function', function: { name: 'append_note', arguments: '{"text": "chat"}' } }] } }] },
    { id: 'resp_1', object: 'response', status: 'completed', output: [{ type: 'function_call', id: 'fc_1', call_id: 'or1', name: 'append_note', arguments: '{"text": "responses"}' }] },
    { id: 'msg_1', type: 'message', role: 'assistant', stop_reason: 'tool_use', content: [{ type: 'tool_use', id: 'an1', name: 'append_note', input: { text: 'anthropic' } }] },
    { candidates: [{ content: { role: 'model', parts: [{ functionCall: { name: 'append_note', args: { text: 'gemini' } } }] }, finishReason: 'STOP' }] },
  ];
  j.turn('note four ways');
  for (const response of responses) {
    const [result] = await j.step(response);
    assert.ok(result.ok, JSON.stringify(result));
  }
  const final = await j.step({ id: 'msg_2', type: 'message', role: 'assistant', stop_reason: 'end_turn', content: [{ type: 'text', text: 'All noted.' }] });
  assert.deepEqual(final, []);
  assert.deepEqual(got.map((g) => g[1]), ['chat', 'responses', 'anthropic', 'gemini']);
  // Gemini's calls carry no id: the journal names them by their place.
  assert.deepEqual(got.map((g) => g[0]), ['oa1', 'or1', 'an1', 'call_1_4_0']);
  const body = j.history('anthropic');
  await j.close();
  assert.deepEqual(body.messages.at(-1), { role: 'assistant', content: [{ type: 'text', text: 'All noted.' }] });
  assert.deepEqual(tj.readResponse(responses[0]).calls, [{ id: 'oa1', name: 'append_note', arguments: '{"text": "chat"}' }]);
});

test('history gives each format a whole body, and rebuild equals the recover binary\'s', async (t) => {
  const { ws, journal } = scratch(t);
  const j = await Journal.create(journal, { workspace: ws });
  j.tool('append_note', () => 'noted', { schema: NOTE_SCHEMA, description: 'Appends a note.' });
  j.turn('note it');
  await j.step(notes('x'));
  const chat = j.history('openai-chat');
  assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant', 'tool']);
  assert.equal(chat.messages[2].tool_call_id, 'c1');
  assert.equal(chat.tools[0].function.name, 'append_note');
  assert.deepEqual(j.history('openai-responses').input.slice(-2).map((i) => i.type), ['function_call', 'function_call_output']);
  assert.ok('functionResponse' in j.history('gemini').contents.at(-1).parts[0]);
  assert.throws(() => j.history('cohere'), (e) => e instanceof tj.UsageError && /not one of/.test(e.message));
  await j.close();
  for (const format of FORMATS) {
    assert.deepEqual(rebuild(journal, format), recoverRebuild(journal, format), format);
  }
});

test('misuse is a UsageError naming what was wrong', async (t) => {
  const { dir, ws, journal } = scratch(t);
  const j = await Journal.create(journal, { workspace: ws });
  j.tool('t', () => 'x');
  await assert.rejects(j.step([]), (e) => e instanceof tj.UsageError && /no turn is open/.test(e.message));
  j.turn('t');
  await assert.rejects(j.step({ hello: 'world' }), (e) => e instanceof tj.UsageError && /response: .*not a response of/.test(e.message));
  await assert.rejects(j.step([{ id: 'a' }]), (e) => e instanceof tj.UsageError && /calls\[0\]\.name: missing/.test(e.message));
  assert.throws(() => j.tool('late', () => 'x'), (e) => e instanceof tj.UsageError && /before the first turn/.test(e.message));
  assert.throws(() => j.tool('t', () => 'x'), (e) => e instanceof tj.UsageError && /registered twice/.test(e.message));
  assert.throws(() => j.tool('u', () => 'x', { readonly: true }), (e) => e instanceof tj.UsageError && /unknown option `readonly`/.test(e.message));
  // While a step is in flight, the journal refuses what would wait for it.
  let inside;
  const j2 = await Journal.create(path.join(dir, 'j2'), { workspace: ws });
  j2.tool('reenter', () => {
    try {
      j2.turn('nested');
    } catch (e) {
      inside = e;
    }
    return 'x';
  });
  j2.tool('slow', () => new Promise((resolve) => setTimeout(() => resolve('slow done'), 20)));
  j2.turn('go');
  await j2.step([{ id: 'r', name: 'reenter' }]);
  // A second step while one is in flight is refused, and the first still ends.
  const first = j2.step([{ id: 's', name: 'slow' }]);
  await assert.rejects(j2.step([{ id: 't', name: 'slow' }]), (e) => e instanceof tj.UsageError && /in flight/.test(e.message));
  assert.deepEqual((await first).map((r) => r.content), ['slow done']);
  assert.ok(inside instanceof tj.UsageError && /in flight: await it first/.test(inside.message), String(inside));
  await j2.close();
  await j.close();
  assert.throws(() => j.turn('after close'), (e) => e instanceof tj.UsageError && /not open/.test(e.message));
  await assert.rejects(Journal.create(path.join(dir, 'j3'), { workspace: path.join(dir, 'missing') }), (e) => e instanceof tj.UsageError && /not a directory/.test(e.message));
  await assert.rejects(Journal.create(path.join(dir, 'j4'), { workspace: ws, fsync: 'sometimes' }), /fsync `sometimes`: not one of/);
  assert.equal(new tj.UsageError('x').code, 1);
  assert.equal(new tj.Corrupt('x', 2).code, 2);
  assert.ok(new tj.JournalLocked('x') instanceof tj.TooljournalError);
});

test('a corrupt journal throws Corrupt with the CLI\'s message and exit code', async (t) => {
  const { ws, journal } = scratch(t);
  const j = await Journal.create(journal, { workspace: ws });
  j.tool('t', () => 'x');
  j.turn('one');
  await j.step([{ id: 'a', name: 't' }]);
  j.turn('two');
  await j.step([{ id: 'b', name: 't' }]);
  await j.close();
  const [segment] = fs.readdirSync(journal).filter((f) => f.endsWith('.segment'));
  const file = path.join(journal, segment);
  const data = fs.readFileSync(file);
  data[Math.floor(data.length / 3)] ^= 0xff;
  fs.writeFileSync(file, data);
  let caught;
  assert.throws(() => classify(journal), (e) => ((caught = e), e instanceof tj.Corrupt));
  const cli = run([binary('recover'), 'classify', '--dry-run', journal], { check: false });
  assert.equal(cli.status, 2);
  assert.equal(caught.code, 2);
  assert.ok(cli.stderr.includes(caught.message), `${cli.stderr} / ${caught.message}`);
});

const HOLDER = `
const { Journal } = await import(process.argv[2]);
const [journal, ws, ready] = process.argv.slice(3);
const j = await Journal.create(journal, { workspace: ws });
(await import('node:fs')).writeFileSync(ready, String(process.pid));
process.stdin.on('data', () => {});
process.stdin.on('end', async () => { await j.close(); });
`;

test('a second process on the journal is refused while the first holds it', async (t) => {
  const { dir, ws, journal } = scratch(t);
  const ready = path.join(dir, 'ready');
  const child = startChild(dir, HOLDER, journal, ws, ready);
  t.after(() => child.kill('SIGKILL'));
  await waitUntil(() => fs.existsSync(ready), child);
  const pid = fs.readFileSync(ready, 'utf8');
  await assert.rejects(Journal.create(journal, { workspace: ws }), (e) => e instanceof tj.JournalLocked && e.message.includes(pid));
  await assert.rejects(Journal.resume(journal), (e) => e instanceof tj.JournalLocked && e.message.includes(pid));
  child.stdin.end();
  assert.deepEqual(await child.exited, { code: 0, sig: null });
  // Released: the session it left (opened, closed) can be resumed here now.
  const j = await Journal.resume(journal);
  assert.deepEqual(j.rerunResults, []);
  await j.close();
});

test('abort() stops the step: the running call sees its signal, queued ones never start', async (t) => {
  const { ws, journal } = scratch(t);
  const j = await Journal.create(journal, { workspace: ws });
  const ran = [];
  j.tool('wait_for_stop', (args, ctx) => {
    ran.push(ctx.callId);
    setTimeout(() => j.abort(), 20);
    return new Promise((resolve, reject) => {
      ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
      setTimeout(() => resolve('never stopped'), 10_000);
    });
  });
  j.tool('after', (args, ctx) => ran.push(ctx.callId));
  j.turn('wait');
  let aborted;
  await assert.rejects(j.step([
    { id: 'w', name: 'wait_for_stop' },
    { id: 'a1', name: 'after' },
    { id: 'a2', name: 'after' },
  ]), (e) => ((aborted = e), e instanceof tj.StepAborted && e.name === 'AbortError'));
  assert.deepEqual(ran, ['w']);
  assert.deepEqual(aborted.results.map((r) => [r.callId, r.code]), [['w', 'ABORTED'], ['a1', 'ABORTED_BEFORE_DISPATCH'], ['a2', 'ABORTED_BEFORE_DISPATCH']]);
  // The turn ended with the step, as the CLI ends it on Ctrl-C.
  await assert.rejects(j.step([]), /no turn is open/);
  j.turn('again');
  assert.deepEqual(await j.step([]), []);
  await j.close();
  const calls = classify(journal);
  assert.ok(calls.every((c) => c.classification === null), JSON.stringify(calls));
});

test('an AbortSignal given to step stops it; one aborted before stops every call', async (t) => {
  const { ws, journal } = scratch(t);
  const j = await Journal.create(journal, { workspace: ws });
  const ran = [];
  j.tool('slow', (args, ctx) => {
    ran.push(ctx.callId);
    return new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('stopped early')));
  });
  j.turn('one');
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 20);
  // A body that resolves once stopped: its call ends with what it gave; the next never starts.
  await assert.rejects(j.step([{ id: 's1', name: 'slow' }, { id: 's2', name: 'slow' }], { signal: controller.signal }), (e) => {
    assert.deepEqual(e.results.map((r) => [r.callId, r.code]), [['s1', null], ['s2', 'ABORTED_BEFORE_DISPATCH']]);
    return e instanceof tj.StepAborted;
  });
  j.turn('two');
  await assert.rejects(j.step([{ id: 's3', name: 'slow' }], { signal: AbortSignal.abort() }), (e) => {
    assert.ok(['ABORTED', 'ABORTED_BEFORE_DISPATCH'].includes(e.results[0].code), e.results[0].code);
    return e instanceof tj.StepAborted;
  });
  assert.deepEqual(ran, ['s1']);
  await j.close();
});

test('a call past its time limit sees its signal abort and ends as timed out', async (t) => {
  const { ws, journal } = scratch(t);
  const j = await Journal.create(journal, { workspace: ws });
  let sawAbort = false;
  j.tool('hang', (args, ctx) => new Promise((resolve, reject) => {
    ctx.signal.addEventListener('abort', () => {
      sawAbort = true;
      reject(new Error('gave up'));
    });
  }), { timeoutMs: 100 });
  j.turn('hang');
  const [result] = await j.step([{ id: 'h', name: 'hang' }]);
  await j.close();
  assert.ok(sawAbort);
  assert.equal(result.ok, false);
  assert.match(result.code, /TIMEOUT/);
});

test('require and import give the same package', () => {
  const require = createRequire(import.meta.url);
  const cjs = require('..');
  assert.equal(cjs.Journal, Journal);
  assert.equal(cjs.classify, classify);
  assert.deepEqual([...cjs.FORMATS], ['openai-chat', 'openai-responses', 'anthropic', 'gemini']);
});

test('odd values from bodies end their calls, never the step', async (t) => {
  const { ws, journal } = scratch(t);
  const j = await Journal.create(journal, { workspace: ws });
  j.tool('gives_a_function', async () => () => 1);
  j.tool('throws_no_text', () => {
    throw Object.create(null);
  });
  j.turn('odd');
  const [fn, bare] = await j.step([{ id: 'f', name: 'gives_a_function' }, { id: 'b', name: 'throws_no_text' }]);
  await j.close();
  assert.deepEqual([fn.ok, fn.content], [true, '() => 1']);
  assert.deepEqual([bare.code, bare.content], ['TOOL_FAILED', 'TOOL_FAILED: a value that cannot be written as text was thrown']);
});

test('a bad tool given to create leaves no journal held', async (t) => {
  const { ws, journal } = scratch(t);
  const twice = [tj.tool('t', () => 'x'), tj.tool('t', () => 'y')];
  await assert.rejects(Journal.create(journal, { workspace: ws, tools: twice }), /registered twice/);
  await assert.rejects(Journal.create(journal, { workspace: ws, tools: [tj.tool('not a name!', () => 'x')] }), tj.UsageError);
  const j = await Journal.create(journal, { workspace: ws, tools: [twice[0]] });
  await j.close();
});

test('a step refused while another is in flight leaves the first one\'s stop alone', async (t) => {
  const { ws, journal } = scratch(t);
  const j = await Journal.create(journal, { workspace: ws });
  j.tool('wait', (args, ctx) => new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason))));
  j.tool('stops_its_own_step', () => {
    controller.abort();
    return 'asked to stop';
  });
  const controller = new AbortController();
  j.turn('one');
  const first = j.step([{ id: 'w', name: 'wait' }]);
  await assert.rejects(j.step([{ id: 'x', name: 'wait' }], { signal: AbortSignal.abort() }), tj.UsageError);
  j.abort();
  await assert.rejects(first, (e) => e instanceof tj.StepAborted && e.results[0].code === 'ABORTED');
  // A body aborting its own step's signal, during the step's first poll, stops what follows.
  j.turn('two');
  await assert.rejects(j.step([{ id: 's', name: 'stops_its_own_step' }, { id: 'n', name: 'wait' }], { signal: controller.signal }), (e) => {
    assert.deepEqual(e.results.map((r) => [r.callId, r.code]), [['s', null], ['n', 'ABORTED_BEFORE_DISPATCH']]);
    return e instanceof tj.StepAborted;
  });
  await j.close();
});

const DROPPED = `
const { Journal } = await import(process.argv[2]);
const [journal, ws] = process.argv.slice(3);
async function openAndDrop() {
  const j = await Journal.create(journal, { workspace: ws });
  j.tool('t', () => 'x');
}
await openAndDrop();
for (let i = 0; i < 10; i++) {
  global.gc();
  await new Promise((r) => setTimeout(r, 20));
}
const again = await Journal.create(journal, { workspace: ws });
await again.close();
console.log('created again');
`;

test('a journal dropped without close is collected, and its lock let go', (t) => {
  const { dir, ws, journal } = scratch(t);
  const file = path.join(dir, 'dropped.mjs');
  fs.writeFileSync(file, DROPPED);
  const done = spawnSync(process.execPath, ['--expose-gc', file, path.join(PACKAGE, 'index.mjs'), journal, ws], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(done.status, 0, done.stderr);
  assert.equal(done.stdout.trim(), 'created again');
});
