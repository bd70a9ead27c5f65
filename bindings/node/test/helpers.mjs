// What the package's tests share: the repository's binaries (built by cargo; a test fails,
// never skips, when one is missing), temporary directories, and child Node agents to crash.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PACKAGE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const REPO = path.resolve(PACKAGE, '..', '..');
export const INDEX = path.join(PACKAGE, 'index.mjs');

/** A binary of the workspace: `TOOLJOURNAL_BIN_DIR` (where .ci/run built them), else target/debug. */
export function binary(name) {
  const dir = process.env.TOOLJOURNAL_BIN_DIR || path.join(REPO, 'target', 'debug');
  const file = path.join(dir, name);
  assert.ok(
    fs.existsSync(file),
    `${file} not found: build it with \`cargo build --bin ${name}\` in ${REPO} (or set TOOLJOURNAL_BIN_DIR)`,
  );
  return file;
}

/** Runs a command to its end; `check` fails the test on a non-zero exit. */
export function run(args, { check = true } = {}) {
  const done = spawnSync(args[0], args.slice(1), { encoding: 'utf8', timeout: 120_000 });
  if (check) assert.equal(done.status, 0, `${args.join(' ')} exited ${done.status}: ${done.stderr}`);
  return done;
}

/** `recover COMMAND --json --dry-run JOURNAL ...`, parsed. */
export function recoverJson(command, journal, ...extra) {
  return JSON.parse(run([binary('recover'), command, '--json', '--dry-run', journal, ...extra]).stdout);
}

/** `recover rebuild --dry-run --format FORMAT JOURNAL`, parsed. */
export function recoverRebuild(journal, format) {
  return JSON.parse(run([binary('recover'), 'rebuild', '--dry-run', '--format', format, journal]).stdout);
}

/** A fresh directory with a workspace `ws` in it; the journal goes to `<dir>/journal`. */
export function scratch(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tooljournal-node-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const ws = path.join(dir, 'ws');
  fs.mkdirSync(ws);
  return { dir, ws, journal: path.join(dir, 'journal') };
}

/**
 * A child Node agent running `source` (an ES module; it imports the package as `tooljournal`
 * through the `INDEX` it is given as `process.argv[2]`), with `args` after it.
 */
export function startChild(dir, source, ...args) {
  const file = path.join(dir, `agent-${Math.random().toString(36).slice(2)}.mjs`);
  fs.writeFileSync(file, source);
  const child = spawn(process.execPath, [file, INDEX, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  child.stderrText = '';
  child.stdoutText = '';
  child.stderr.on('data', (d) => (child.stderrText += d));
  child.stdout.on('data', (d) => (child.stdoutText += d));
  child.exited = new Promise((resolve) => child.on('exit', (code, sig) => resolve({ code, sig })));
  return child;
}

/** Until `check()` is true; a child that exits first fails the test with its stderr. */
export async function waitUntil(check, child, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (child && child.exitCode !== null) assert.fail(`the child exited ${child.exitCode}: ${child.stderrText}`);
    if (Date.now() > deadline) {
      child?.kill('SIGKILL');
      assert.fail(`not there after ${timeoutMs} ms; child stderr: ${child?.stderrText}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The lines of a JSON-lines log the agents write. */
export function logLines(file) {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}
