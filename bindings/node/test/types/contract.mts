// The contract as a TypeScript user writes it, type-checked against the package's index.d.ts
// (test/types.test.mjs runs tsc on it). Each `@ts-expect-error` is a misuse the types must
// refuse: were a declaration too loose, tsc would report the directive unused.
import { Journal, classify, rebuild, audit, tool, StepAborted, JournalLocked } from 'tooljournal';
import type { CallContext, StepResult, ClassifiedCall, Format } from 'tooljournal';

export async function contract(path: string, ws: string): Promise<void> {
  const j = await Journal.create(path, { workspace: ws });
  j.tool('append_note', async (args: { text: string }, ctx: CallContext) => {
    const key: string = ctx.idempotencyKey;
    const signal: AbortSignal = ctx.signal;
    return `ok ${args.text} ${ctx.callId} ${key} ${signal.aborted}`;
  }, { readOnly: false, idempotent: false, schema: { type: 'object' } });
  j.turn("the user's prompt");
  const results: StepResult[] = await j.step([{ id: 'c1', name: 'append_note', arguments: '{"text":"hi"}' }]);
  const first: { callId: string; ok: boolean; content: string; code: string | null } = results[0];
  const raw = await j.step({ choices: [] }, { signal: AbortSignal.timeout(1000), text: 'hi' });
  const body = j.history('anthropic');
  await j.close();
  const r = await Journal.resume(path, { tools: [tool('append_note', () => 'again')], rerun: 'not-started' });
  const rerun: StepResult[] = r.rerunResults;
  const calls: ClassifiedCall[] = classify(path);
  const verdict: null | 'TOOL_NOT_STARTED' | 'TOOL_OUTCOME_UNKNOWN' = calls[0].classification;
  const format: Format = 'gemini';
  const rebuilt: object = rebuild(path, format);
  const audited: object = audit(path, { balance: false });
  try {
    await r.step([]);
  } catch (e) {
    if (e instanceof StepAborted) console.log(e.results.length);
    if (e instanceof JournalLocked) console.log(e.code);
  }
  console.log(first, raw, body, rerun, verdict, rebuilt, audited);

  // @ts-expect-error: not a format
  j.history('cohere');
  // @ts-expect-error: a step takes calls or a response object, not text
  await j.step('append_note');
  // @ts-expect-error: an unknown tool option
  j.tool('t', () => 'x', { readonly: true });
  // @ts-expect-error: rerun is a choice of three
  await Journal.resume(path, { rerun: 'everything' });
  // @ts-expect-error: a result has no `id`, its id is `callId`
  console.log(results[0].id);
  // @ts-expect-error: the context's id is `callId`
  j.tool('u', (_args, ctx) => ctx.call_id);
}
