// A journal in PostgreSQL, through the package: created, stepped, read by the package and by the
// `recover` binary, resumed. The server is the file's own (initdb and pg_ctl on a Unix socket in
// a temporary directory, started once); missing PostgreSQL fails the test, never skips it.
import test, { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Journal, JournalLocked, classify, tool } from '../index.mjs';
import { binary, recoverJson, run, scratch } from './helpers.mjs';

function pgBin(name) {
  const onPath = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).stdout.trim();
  if (onPath) return onPath;
  const versions = fs.existsSync('/usr/lib/postgresql') ? fs.readdirSync('/usr/lib/postgresql').sort((a, b) => a - b) : [];
  const found = versions.map((v) => `/usr/lib/postgresql/${v}/bin/${name}`).filter((p) => fs.existsSync(p)).at(-1);
  assert.ok(found, `${name} not found: install PostgreSQL's server (apt-get install postgresql)`);
  return found;
}

// initdb refuses root: run the server as `postgres` then (Debian's package makes the user).
const asServerUser = (args) => (process.getuid() === 0 ? ['runuser', '-u', 'postgres', '--', ...args] : args);

let base;
let data;
before(() => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'tooljournal-node-pg-'));
  if (process.getuid() === 0) {
    const id = (flag) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
    fs.chownSync(base, id('-u'), id('-g'));
  }
  data = path.join(base, 'data');
  run(asServerUser([pgBin('initdb'), '-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync']));
  const options = `-c listen_addresses='' -k ${base} -c fsync=off`;
  run(asServerUser([pgBin('pg_ctl'), '-D', data, '-l', path.join(base, 'log'), '-w', '-t', '60', '-o', options, 'start']));
  run([binary('tooljournal'), 'store', 'init', `postgres://postgres@/postgres?host=${base}`]);
});

after(() => {
  if (data) {
    const stop = asServerUser([pgBin('pg_ctl'), '-D', data, '-m', 'immediate', 'stop']);
    spawnSync(stop[0], stop.slice(1));
  }
  if (base) fs.rmSync(base, { recursive: true, force: true });
});

test('a PostgreSQL journal is written, read and resumed through the package', async (t) => {
  const { ws } = scratch(t);
  const url = `postgres://postgres@/postgres?host=${base}&session=node-1`;
  const appendNote = tool('append_note', (args) => `noted ${args.text}`);
  const j = await Journal.create(url, { workspace: ws, tools: [appendNote] });
  j.turn('note it');
  const results = await j.step([{ id: 'p1', name: 'append_note', arguments: { text: 'in pg' } }]);
  assert.equal(results[0].content, 'noted in pg');
  assert.ok(j.location.includes('node-1'), j.location);
  // Held: a second writer is refused while this one holds the lease.
  await assert.rejects(Journal.create(url, { workspace: ws }), JournalLocked);
  const body = j.history('anthropic');
  assert.equal(body.messages.at(-1).content[0].tool_use_id, 'p1');
  await j.close();

  const calls = classify(url);
  assert.deepEqual(calls.map((c) => [c.callId, c.state]), [['p1', 'committed']]);
  assert.deepEqual(recoverJson('classify', url).calls.map((c) => [c.call_id, c.state, c.classification]), calls.map((c) => [c.callId, c.state, c.classification]));

  const again = await Journal.resume(url, { tools: [tool('append_note', (args) => `noted ${args.text}`)] });
  again.turn('more');
  await again.step([{ id: 'p2', name: 'append_note', arguments: { text: 'again' } }]);
  await again.close();
  assert.deepEqual(classify(url).map((c) => c.callId), ['p1', 'p2']);
});
