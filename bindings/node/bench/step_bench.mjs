// Calls per second of `journal.step` with one no-op JavaScript tool, one call per step, as
// `bench runtime` measures the Rust runtime's `seq_calls_per_s` (policy group) and
// `nosync_calls_per_s` (policy never).
//
//     node bench/step_bench.mjs [--seconds 3] [--rounds 3] [--dir D] [--seq-calls-per-s N]
//
// Prints one line per round and the median of each key; with `--seq-calls-per-s` (the figure
// `cargo run --release -p tooljournal-bench -- runtime --quick` printed on the same machine),
// also the ratio against it (the goal: 0.8 or more). Build the package with `npm run build`
// (release) first: a debug build measures the wrong thing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Journal } from '../index.mjs';

const { values: opts } = parseArgs({
  options: {
    seconds: { type: 'string', default: '3' },
    rounds: { type: 'string', default: '3' },
    dir: { type: 'string' },
    'seq-calls-per-s': { type: 'string' },
  },
});

async function rate(fsync, seconds, root) {
  const ws = path.join(root, 'ws');
  fs.mkdirSync(ws, { recursive: true });
  const j = await Journal.create(path.join(root, `journal-${fsync}-${process.hrtime.bigint()}`), {
    workspace: ws,
    fsync,
  });
  j.tool('noop', () => '');
  j.turn('bench');
  // Warm-up: the first steps open files and fill caches.
  for (let i = 0; i < 200; i++) await j.step([{ id: `w${i}`, name: 'noop', arguments: '{}' }]);
  let n = 0;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  let now;
  for (;;) {
    for (let k = 0; k < 100; k++) {
      await j.step([{ id: `c${n}`, name: 'noop', arguments: '{}' }]);
      n++;
    }
    now = performance.now();
    if (now >= deadline) break;
  }
  await j.close();
  return n / ((now - start) / 1000);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const root = fs.mkdtempSync(path.join(opts.dir ?? os.tmpdir(), 'tooljournal-node-bench-'));
const figures = { node_seq_calls_per_s: [], node_nosync_calls_per_s: [] };
try {
  for (let r = 0; r < Number(opts.rounds); r++) {
    const seq = await rate('group', Number(opts.seconds), root);
    const nosync = await rate('never', Number(opts.seconds), root);
    figures.node_seq_calls_per_s.push(seq);
    figures.node_nosync_calls_per_s.push(nosync);
    console.log(`round ${r + 1}: node_seq_calls_per_s ${seq.toFixed(0)}  node_nosync_calls_per_s ${nosync.toFixed(0)}`);
  }
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
for (const [key, xs] of Object.entries(figures)) {
  console.log(`${key} ${median(xs).toFixed(0)} (min ${Math.min(...xs).toFixed(0)}, max ${Math.max(...xs).toFixed(0)})`);
}
const nosync = median(figures.node_nosync_calls_per_s);
console.log(`node_nosync_calls_per_s target 50000: ${nosync >= 50000 ? 'met' : 'NOT met'}`);
if (opts['seq-calls-per-s']) {
  const ratio = median(figures.node_seq_calls_per_s) / Number(opts['seq-calls-per-s']);
  console.log(`node_seq_vs_rust_seq ${ratio.toFixed(2)} (target 0.8: ${ratio >= 0.8 ? 'met' : 'NOT met'})`);
}
