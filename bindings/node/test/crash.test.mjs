// A Node agent SIGKILLed while a tool runs: what the package and the `recover` binary say of its
// calls, and what `Journal.resume` runs again. Journals cross the other ways too: the CLI's and
// the Python package's are read and resumed here, and Python resumes a Node agent's.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Journal, classify, rebuild, tool, FORMATS } from '../index.mjs';
import { binary, logLines, recoverJson, recoverRebuild, run, scratch, startChild, waitUntil, REPO } from './helpers.mjs';

const AGENT = `
const { Journal } = await import(process.argv[2]);
const fs = await import('node:fs');
const [journal, ws, log] = process.argv.slice(3);
const j = await Journal.create(journal, { workspace: ws });
const note = (entry) => fs.appendFileSync(log, JSON.stringify(entry) + '\\n');
j.tool('slow_write', async (args, ctx) => {
  note(['slow_write', ctx.callId, ctx.idempotencyKey]);
  await new Promise((resolve) => setTimeout(resolve, 60_000));
  return 'written';
});
j.tool('append_note', (args, ctx) => {
  note(['append_note', ctx.callId, ctx.idempotencyKey]);
  return 'noted ' + args.text;
});
j.turn('write, then note twice');
await j.step([{ id: 'done1', name: 'append_note', arguments: { text: 'before' } }]);
await j.step([
  { id: 'k1', name: 'slow_write', arguments: {} },
  { id: 'k2', name: 'append_note', arguments: { text: 'a' } },
  { id: 'k3', name: 'append_note', arguments: { text: 'b' } },
]);
`;

/** Runs AGENT and SIGKILLs it once the slow call is inside its body. */
async function crash(t) {
  const paths = scratch(t);
  const log = path.join(paths.dir, 'calls.log');
  const child = startChild(paths.dir, AGENT, paths.journal, paths.ws, log);
  t.after(() => child.kill('SIGKILL'));
  await waitUntil(() => logLines(log).length >= 2, child);
  child.kill('SIGKILL');
  assert.equal((await child.exited).sig, 'SIGKILL');
  return { ...paths, log };
}

function toolsForResume(log) {
  const note = (entry) => fs.appendFileSync(log, JSON.stringify(entry) + '\n');
  return [
    tool('slow_write', () => {
      throw new Error('a call of unknown outcome must never run again');
    }),
    tool('append_note', (args, ctx) => {
      note(['append_note', ctx.callId, ctx.idempotencyKey]);
      return `noted ${args.text}`;
    }),
  ];
}

/**
 * docs/FORMAT.md, *Idempotency keys*: `tj1-` and the sha256 of the session id, the turn, the
 * step and the call id, each text preceded by its little-endian u64 length, each number as a
 * little-endian u64. Written here from the document, not from the code.
 */
function documentedKey(sessionId, turn, step, callId) {
  const h = createHash('sha256');
  const u64 = (n) => {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(n));
    return b;
  };
  for (const part of [sessionId, turn, step, callId]) {
    if (typeof part === 'number') h.update(u64(part));
    else {
      const bytes = Buffer.from(part, 'utf8');
      h.update(u64(bytes.length));
      h.update(bytes);
    }
  }
  return `tj1-${h.digest('hex')}`;
}

const byId = (calls) => Object.fromEntries(calls.map((c) => [c.callId ?? c.call_id, c]));

test('a SIGKILLed Node agent is classified truthfully, and the recover binary agrees', async (t) => {
  const { journal, log } = await crash(t);
  assert.deepEqual(logLines(log).map((l) => l[1]), ['done1', 'k1']);
  const calls = byId(classify(journal));
  assert.deepEqual([calls.done1.state, calls.done1.classification], ['committed', null]);
  assert.deepEqual([calls.k1.state, calls.k1.classification], ['started', 'TOOL_OUTCOME_UNKNOWN']);
  assert.equal(calls.k2.classification, 'TOOL_NOT_STARTED');
  assert.equal(calls.k3.classification, 'TOOL_NOT_STARTED');
  const theirs = byId(recoverJson('classify', journal).calls);
  const pairs = (cs) => Object.fromEntries(Object.entries(cs).map(([k, c]) => [k, [c.state, c.classification]]));
  assert.deepEqual(pairs(theirs), pairs(calls));
  // Reading changed nothing: the binary's own read-only verify still passes.
  run([binary('recover'), 'verify', journal]);
  for (const format of FORMATS) {
    const body = rebuild(journal, format);
    const text = JSON.stringify(body);
    assert.ok(text.includes('TOOL_OUTCOME_UNKNOWN') && text.includes('TOOL_NOT_STARTED'), format);
    assert.deepEqual(body, recoverRebuild(journal, format), format);
  }
});

test('Journal.resume runs the not-started calls once, with their ids and keys', async (t) => {
  const { journal, log } = await crash(t);
  const j = await Journal.resume(journal, { tools: toolsForResume(log) });
  // The keys docs/FORMAT.md derives for them (turn 1, step 2): nothing journaled them before.
  const keys = { k2: documentedKey(j.sessionId, 1, 2, 'k2'), k3: documentedKey(j.sessionId, 1, 2, 'k3') };
  assert.deepEqual(j.rerunResults.map((r) => [r.callId, r.ok, r.content]), [['k2', true, 'noted a'], ['k3', true, 'noted b']]);
  const reran = logLines(log).slice(2);
  assert.deepEqual(reran, [['append_note', 'k2', keys.k2], ['append_note', 'k3', keys.k3]]);
  // The session goes on with new turns; a second resume runs nothing again.
  j.turn('one more');
  const [r] = await j.step([{ id: 'k4', name: 'append_note', arguments: { text: 'c' } }]);
  assert.ok(r.ok);
  await j.close();
  const again = await Journal.resume(journal, { tools: toolsForResume(log) });
  assert.deepEqual(again.rerunResults, []);
  await again.close();
  assert.deepEqual(logLines(log).map((l) => l[1]), ['done1', 'k1', 'k2', 'k3', 'k4']);
  const calls = byId(classify(journal));
  assert.equal(calls.k1.classification, 'TOOL_OUTCOME_UNKNOWN');
  assert.ok(['k2', 'k3', 'k4'].every((k) => calls[k].state === 'committed'));
});

test('resume without a re-run runs nothing and answers every call', async (t) => {
  const { journal, log } = await crash(t);
  const j = await Journal.resume(journal, { tools: toolsForResume(log), rerun: null });
  assert.deepEqual(j.rerunResults, []);
  const body = j.history('openai-chat');
  await j.close();
  assert.deepEqual(body.messages.filter((m) => m.role === 'tool').map((m) => m.tool_call_id), ['done1', 'k1', 'k2', 'k3']);
  assert.equal(logLines(log).length, 2);
});

test('journals the CLI wrote read the same through the package', () => {
  const demo = run([binary('tooljournal'), 'demo']);
  const journal = /^journal: (.+)$/m.exec(demo.stdout)[1];
  const crashed = path.join(path.dirname(journal), 'crashed-journal');
  assert.ok(fs.existsSync(crashed), demo.stdout);
  for (const where of [journal, crashed]) {
    const ours = classify(where);
    const theirs = recoverJson('classify', where).calls;
    assert.ok(ours.length >= 10, where);
    assert.deepEqual(ours.map((c) => [c.callId, c.state, c.classification]), theirs.map((c) => [c.call_id, c.state, c.classification]), where);
    for (const format of FORMATS) assert.deepEqual(rebuild(where, format), recoverRebuild(where, format), `${where} ${format}`);
  }
  assert.ok(classify(crashed).some((c) => c.classification));
});

/** The Python package's interpreter: `TOOLJOURNAL_PYTHON` (.ci/run's venv), else /work/pyenv. */
function python() {
  const candidates = [process.env.TOOLJOURNAL_PYTHON, path.join(REPO, 'target', 'ci-python', 'bin', 'python')].filter(Boolean);
  const found = candidates.find((p) => fs.existsSync(p));
  assert.ok(found, `no Python with the tooljournal package: set TOOLJOURNAL_PYTHON (tried ${candidates.join(', ')}); .ci/run makes target/ci-python`);
  const probe = run([found, '-c', 'import tooljournal'], { check: false });
  assert.equal(probe.status, 0, `${found} cannot import tooljournal: ${probe.stderr}`);
  return found;
}

const PY_AGENT = `
import json, os, signal, sys, tooljournal
journal, ws, log = sys.argv[1:4]
j = tooljournal.Journal.create(journal, workspace=ws)

@j.tool("append_note")
def append_note(args, ctx):
    with open(log, "a") as f:
        f.write(json.dumps(["append_note", ctx.call_id, ctx.idempotency_key]) + "\\n")
    if args["text"] == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    return "noted " + args["text"]

j.turn("python writes")
j.step([{"id": "p1", "name": "append_note", "arguments": {"text": "die"}},
        {"id": "p2", "name": "append_note", "arguments": {"text": "later"}}])
`;

const PY_RESUME = `
import json, sys, tooljournal
journal, log = sys.argv[1:3]

@tooljournal.tool("append_note")
def append_note(args, ctx):
    with open(log, "a") as f:
        f.write(json.dumps(["append_note", ctx.call_id, ctx.idempotency_key]) + "\\n")
    return "noted " + args["text"]

@tooljournal.tool("slow_write")
def slow_write(args, ctx):
    raise AssertionError("a call of unknown outcome must never run again")

j = tooljournal.Journal.resume(journal, tools=[append_note, slow_write])
print(json.dumps({"session": j.session_id, "rerun": j.rerun_results}))
j.close()
`;

test('journals cross between the Python and Node packages, both ways', async (t) => {
  const py = python();
  // Python crashes, Node reads and resumes.
  const a = scratch(t);
  const aLog = path.join(a.dir, 'calls.log');
  const died = run([py, '-c', PY_AGENT, a.journal, a.ws, aLog], { check: false });
  assert.equal(died.signal, 'SIGKILL', died.stderr);
  const calls = byId(classify(a.journal));
  assert.deepEqual([calls.p1.classification, calls.p2.classification], ['TOOL_OUTCOME_UNKNOWN', 'TOOL_NOT_STARTED']);
  const j = await Journal.resume(a.journal, { tools: toolsForResume(aLog) });
  assert.deepEqual(j.rerunResults.map((r) => [r.callId, r.content]), [['p2', 'noted later']]);
  assert.deepEqual(logLines(aLog).map((l) => l[1]), ['p1', 'p2']);
  assert.equal(logLines(aLog)[1][2], documentedKey(j.sessionId, 1, 1, 'p2'));
  await j.close();

  // Node crashes, Python resumes.
  const { journal, log } = await crash(t);
  const resumed = JSON.parse(run([py, '-c', PY_RESUME, journal, log]).stdout);
  assert.deepEqual(resumed.rerun.map((r) => [r.call_id, r.content]), [['k2', 'noted a'], ['k3', 'noted b']]);
  assert.deepEqual(logLines(log).slice(2).map((l) => l.slice(1)), [
    ['k2', documentedKey(resumed.session, 1, 2, 'k2')],
    ['k3', documentedKey(resumed.session, 1, 2, 'k3')],
  ]);
  assert.equal(byId(classify(journal)).k1.classification, 'TOOL_OUTCOME_UNKNOWN');
});
