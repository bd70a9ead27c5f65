// The package's TypeScript declarations (index.d.ts) against the contract as a user writes it
// (test/types/contract.mts): tsc must accept every use and refuse every marked misuse.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PACKAGE } from './helpers.mjs';

test('index.d.ts types the contract and refuses its misuses', () => {
  const tsc = path.join(PACKAGE, 'node_modules', 'typescript', 'bin', 'tsc');
  assert.ok(fs.existsSync(tsc), `${tsc} not found: run \`npm install\` in ${PACKAGE}`);
  const done = spawnSync(process.execPath, [tsc, '-p', path.join(PACKAGE, 'test', 'types', 'tsconfig.json')], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(done.status, 0, `tsc rejected the contract:\n${done.stdout}${done.stderr}`);
});
