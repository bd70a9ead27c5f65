// The request bodies tooljournal rebuilds (live `history`, and `rebuild` after a SIGKILL) must
// be accepted by the providers' official TypeScript SDK types: each body is emitted as a fresh
// object literal checked with `satisfies`, so excess-property checks apply at every level, and
// one tsc run checks them all. Broken variants must be rejected, proving the check can fail.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Journal, rebuild, FORMATS } from '../index.mjs';

const PKG = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TSC = path.join(PKG, 'node_modules', 'typescript', 'bin', 'tsc');

const GEMINI_KEYS = ['contents', 'tools', 'generationConfig', 'systemInstruction'];
const GEMINI_TYPES = { contents: 'Content[]', tools: 'Tool[]', generationConfig: 'GenerationConfig', systemInstruction: 'Content' };

let tmp;
const bodies = {}; // `${session}-${format}` -> body
const good = []; // file names
const bad = []; // { file, expect: RegExp, why }
let errors; // file -> [{ line, col, code, text }]
let tscMs;

// -- the bodies ------------------------------------------------------------------------------

async function liveSession() {
  const dir = fs.mkdtempSync(path.join(tmp, 'live-'));
  const j = await Journal.create(path.join(dir, 'journal'), { workspace: dir });
  try {
    j.tool('append_note', (args) => 'noted ' + args.text);
    j.tool('boom', () => {
      throw new Error('disk full');
    });
    j.turn('write two notes');
    const results = await j.step([
      { id: 'call_1', name: 'append_note', arguments: '{"text":"a"}' },
      { id: 'call_2', name: 'boom', arguments: {} },
    ]);
    assert.deepEqual(results.map((r) => [r.callId, r.ok, r.code]), [['call_1', true, null], ['call_2', false, 'TOOL_FAILED']]);
    for (const f of FORMATS) bodies[`live-${f}`] = j.history(f);
  } finally {
    await j.close();
  }
}

// The child runs `slow` (non-overlapping: its body runs on the child's main thread) and is
// killed while its promise is pending, with `append_note` still queued behind it.
const CHILD = `
import fs from 'node:fs';
const { Journal } = await import(process.argv[2]);
const [dir, marker] = process.argv.slice(3);
const j = await Journal.create(dir + '/journal', { workspace: dir });
j.tool('slow', async () => {
  fs.writeFileSync(marker, 'started');
  await new Promise((resolve) => setTimeout(resolve, 1e9));
});
j.tool('append_note', (args) => 'noted ' + args.text);
j.turn('slow, then a note');
await j.step([{ id: 'k1', name: 'slow', arguments: {} }, { id: 'k2', name: 'append_note', arguments: { text: 'x' } }]);
process.exit(3); // never reached: the step cannot end before the kill
`;

async function crashedSession() {
  const dir = fs.mkdtempSync(path.join(tmp, 'crash-'));
  const marker = path.join(dir, 'marker');
  const script = path.join(tmp, 'child.mjs');
  fs.writeFileSync(script, CHILD);
  const child = spawn(process.execPath, [script, pathToFileURL(path.join(PKG, 'index.mjs')).href, dir, marker], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  let done = null;
  exited.then((e) => (done = e));
  const deadline = Date.now() + 20_000;
  try {
    while (!fs.existsSync(marker)) {
      assert.equal(done, null, `the child exited before \`slow\` started: ${JSON.stringify(done)}`);
      assert.ok(Date.now() < deadline, 'the child never started `slow`');
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    child.kill('SIGKILL'); // also when the wait failed: leave no child behind
  }
  assert.deepEqual(await exited, { code: null, signal: 'SIGKILL' });
  for (const f of FORMATS) {
    const body = rebuild(path.join(dir, 'journal'), f);
    const text = JSON.stringify(body);
    assert.match(text, /TOOL_OUTCOME_UNKNOWN/, `${f}: the started call is not answered as unknown`);
    assert.match(text, /TOOL_NOT_STARTED/, `${f}: the queued call is not answered as not started`);
    bodies[`crash-${f}`] = body;
  }
}

// -- the .mts files --------------------------------------------------------------------------

const IMPORTS = {
  'openai-chat': ["import type { ChatCompletionCreateParamsNonStreaming as T } from 'openai/resources/chat/completions';"],
  'openai-responses': ["import type { ResponseCreateParamsNonStreaming as T } from 'openai/resources/responses/responses';"],
  anthropic: ["import type { MessageCreateParamsNonStreaming as T } from '@anthropic-ai/sdk/resources/messages';"],
  gemini: ["import type { Content, Tool, GenerationConfig } from '@google/genai';"],
};
// The rebuilt bodies carry no model (the caller adds it): chat and anthropic require one, and
// responses gets one too, as a real request would.
const MODELS = { 'openai-chat': 'gpt-4o-mini', 'openai-responses': 'gpt-4o-mini', anthropic: 'claude-sonnet-4-5' };

function source(format, body) {
  const lines = [...IMPORTS[format]];
  if (format === 'gemini') {
    // The REST shape has no single SDK type (the SDK's params are {model, contents, config}):
    // check each part, and let nothing else through (asserted in JS, before).
    for (const [key, value] of Object.entries(body)) {
      lines.push(`export const ${key} = ${JSON.stringify(value, null, 2)} satisfies ${GEMINI_TYPES[key]};`);
    }
  } else {
    // The model goes in textually: a spread would not be a fresh literal for excess checks.
    lines.push(`export const body = ${JSON.stringify({ model: MODELS[format], ...body }, null, 2)} satisfies T;`);
  }
  return lines.join('\n') + '\n';
}

function emit(name, format, body) {
  if (format === 'gemini') {
    const extra = Object.keys(body).filter((k) => !GEMINI_KEYS.includes(k));
    assert.deepEqual(extra, [], `${name}: top-level keys the gemini check would not see`);
  }
  const file = `${name}.mts`;
  fs.writeFileSync(path.join(tmp, file), source(format, body));
  return file;
}

// Broken variants of the real bodies, each with the tsc message that must reject it.
const BROKEN = [
  {
    name: 'bad-anthropic-role-tool', from: 'live-anthropic', why: "a message with role 'tool'",
    edit: (b) => { b.messages[2].role = 'tool'; },
    expect: /Type '"tool"' is not assignable to type '[^']*"assistant"/,
  },
  {
    name: 'bad-anthropic-no-tool-use-id', from: 'crash-anthropic', why: 'a tool_result without tool_use_id',
    edit: (b) => { delete b.messages[2].content[0].tool_use_id; },
    expect: /Property 'tool_use_id' is missing/,
  },
  {
    name: 'bad-anthropic-tool-parameters', from: 'live-anthropic', why: "a tool with OpenAI's `parameters` instead of input_schema",
    edit: (b) => { b.tools[0].parameters = b.tools[0].input_schema; delete b.tools[0].input_schema; },
    expect: /'"parameters"' does not exist in type 'Tool \|/,
  },
  {
    name: 'bad-chat-no-tool-call-id', from: 'live-openai-chat', why: 'a tool message without tool_call_id',
    edit: (b) => { delete b.messages[2].tool_call_id; },
    expect: /Property 'tool_call_id' is missing/,
  },
  {
    name: 'bad-chat-unknown-key', from: 'crash-openai-chat', why: "an assistant message with `tool_call` (not tool_calls)",
    edit: (b) => { b.messages[1].tool_call = b.messages[1].tool_calls; delete b.messages[1].tool_calls; },
    expect: /'"tool_call"' does not exist in type 'ChatCompletionAssistantMessageParam'/,
  },
  {
    name: 'bad-chat-temprature', from: 'live-openai-chat', why: "a misspelt top-level key 'temprature'",
    edit: (b) => { b.temprature = 0.2; },
    expect: /'"temprature"' does not exist in type 'ChatCompletionCreateParamsNonStreaming'/,
  },
  {
    name: 'bad-responses-output-number', from: 'crash-openai-responses', why: 'a function_call_output whose output is a number',
    edit: (b) => { b.input[3].output = 42; },
    expect: /'number' is not assignable/,
  },
  {
    name: 'bad-gemini-function-calls', from: 'live-gemini', why: 'a part with the unknown key functionCalls',
    edit: (b) => { const p = b.contents[1].parts[0]; p.functionCalls = [p.functionCall]; delete p.functionCall; },
    expect: /'"functionCalls"' does not exist in type 'Part'/,
  },
  {
    name: 'bad-gemini-response-string', from: 'crash-gemini', why: 'a functionResponse whose response is a string',
    edit: (b) => { const r = b.contents[2].parts[0].functionResponse; r.response = r.response.content; },
    expect: /'string' is not assignable to type 'Record<string, unknown>'/,
  },
];

// -- tsc -------------------------------------------------------------------------------------

function runTsc(files) {
  assert.ok(fs.existsSync(TSC), `tsc is missing: ${TSC}`);
  // The temp dir resolves the SDKs through a link to the package's node_modules.
  fs.symlinkSync(path.join(PKG, 'node_modules'), path.join(tmp, 'node_modules'), 'dir');
  const tsconfig = {
    compilerOptions: {
      strict: true,
      noEmit: true,
      target: 'es2022',
      lib: ['es2022', 'dom'], // the SDKs' fetch/File types
      module: 'nodenext',
      moduleResolution: 'nodenext',
      skipLibCheck: true,
      types: [],
    },
    files,
  };
  fs.writeFileSync(path.join(tmp, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [TSC, '-p', 'tsconfig.json', '--pretty', 'false'], {
    cwd: tmp, encoding: 'utf8', timeout: 120_000,
  });
  tscMs = performance.now() - t0;
  assert.equal(r.error, undefined, `tsc did not run: ${r.error}`);
  const out = r.stdout + r.stderr;
  // `file(line,col): error TSxxxx: message`, continued on indented lines.
  const found = new Map();
  const loose = [];
  let last = null;
  for (const line of out.split('\n')) {
    const m = /^(.+?)\((\d+),(\d+)\): error (TS\d+): (.*)$/.exec(line);
    if (m) {
      last = { line: Number(m[2]), col: Number(m[3]), code: m[4], text: m[5] };
      const file = path.basename(m[1]);
      if (!found.has(file)) found.set(file, []);
      found.get(file).push(last);
    } else if (last && /^\s/.test(line)) {
      last.text += '\n' + line;
    } else if (line.trim()) {
      loose.push(line);
      last = null;
    }
  }
  assert.deepEqual(loose, [], `tsc said what no file explains (exit ${r.status}):\n${out}`);
  for (const f of found.keys()) assert.ok(files.includes(f), `tsc error in an unexpected file ${f}:\n${out}`);
  // 0: no errors; 2: errors in the checked files (any other status is tsc itself failing).
  assert.ok(r.status === 0 || r.status === 2, `tsc exited ${r.status}:\n${out}`);
  return found;
}

function show(list) {
  return list.map((e) => `  (${e.line},${e.col}) ${e.code}: ${e.text}`).join('\n');
}

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tooljournal-sdk-types-'));
  await liveSession();
  await crashedSession();
  for (const [name, body] of Object.entries(bodies)) good.push(emit(name, name.slice(name.indexOf('-') + 1), body));
  for (const b of BROKEN) {
    const body = structuredClone(bodies[b.from]);
    b.edit(body);
    bad.push({ file: emit(b.name, b.from.slice(b.from.indexOf('-') + 1), body), expect: b.expect, why: b.why });
  }
  errors = runTsc([...good, ...bad.map((b) => b.file)]);
});

after(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

test('every session and format was produced', () => {
  assert.equal(good.length, 2 * FORMATS.length);
  assert.ok(bad.length >= 6);
  const v = (p) => JSON.parse(fs.readFileSync(path.join(PKG, 'node_modules', p, 'package.json'), 'utf8')).version;
  const sdks = ['typescript', 'openai', '@anthropic-ai/sdk', '@google/genai'].map((p) => `${p}@${v(p)}`).join(' ');
  console.log(`tsc: ${Math.round(tscMs)} ms for ${good.length + bad.length} files (${sdks})`);
});

for (const session of ['live', 'crash']) {
  for (const format of FORMATS) {
    test(`${session} ${format} body satisfies the SDK type`, () => {
      const file = `${session}-${format}.mts`;
      const list = errors.get(file) ?? [];
      assert.equal(list.length, 0, `${file} rejected by the ${format} SDK types:\n${show(list)}\n--- ${file}\n${fs.readFileSync(path.join(tmp, file), 'utf8')}`);
    });
  }
}

for (const b of BROKEN) {
  test(`tsc rejects ${b.name}: ${b.why}`, () => {
    const file = `${b.name}.mts`;
    const list = errors.get(file) ?? [];
    assert.ok(list.length > 0, `${file} was accepted: the check cannot fail`);
    assert.ok(!list.some((e) => e.code === 'TS2307'), `${file}: an SDK did not resolve:\n${show(list)}`);
    assert.ok(list.some((e) => b.expect.test(e.text)), `${file} rejected, but not for ${b.why}:\n${show(list)}`);
  });
}
