// A Vercel AI SDK (`ai` v6) agent whose tool calls are journaled by tooljournal.
//
// The tools are ordinary `tool({ description, inputSchema, execute })` definitions; `journaled`
// registers their bodies with the journal and hands the SDK stand-ins, so that the calls of one
// model answer run as ONE `j.step` (model order, each call's `started` durable before its body).
// The model is swapped by `baseURL`: OpenAI, any OpenAI-compatible server, or (as the tests do)
// tooljournal's loopback mock provider `mockllm`:
//
//   node examples/ai-sdk-agent.mjs --base-url http://127.0.0.1:PORT/v1 \
//       --journal ./journal --workspace ./ws "Write two notes"
//
// After a crash, `classify(journal)` tells which calls never started and which may have run,
// and `Journal.resume` runs again only what never started.

import { appendFile, mkdir } from 'node:fs/promises';
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createOpenAI } from '@ai-sdk/openai';
import { asSchema, stepCountIs, streamText, tool, wrapLanguageModel } from 'ai';
import { z } from 'zod';
import { Journal } from 'tooljournal';

export const DEFAULT_PROMPT = "Write two notes: 'buy milk' and 'call mom'.";

/**
 * Runs `tools` (AI SDK tools whose `execute(args, ctx)` gets tooljournal's CallContext) through
 * the journal `j`, one `j.step` per model answer. Returns the SDK-facing tools and the
 * middleware to wrap the model with; call it before `j.turn` (tools are journaled at the opening).
 *
 * Why this works: ai 6's streamText parses every tool-call part of an answer (calling each
 * accepted call's `onInputAvailable`, in model order) and only after the answer's `finish` part
 * calls the executes, one promise per call. So when the first execute arrives, the batch is known:
 * the calls the SDK accepted. Each execute parks until all of them have arrived, then the batch
 * runs once. The middleware sees the answer's text (journaled with its calls) and its end; an
 * execute before that end means an SDK that dispatches per part, and is refused rather than
 * split into one step per call.
 */
export async function journaled(j, tools) {
  const answers = new Map(); // toolCallId -> its answer { calls, text, finished, accepted, parked }
  const sdkTools = {};
  for (const [name, t] of Object.entries(tools)) {
    const schema = await asSchema(t.inputSchema).jsonSchema; // the schema the model is shown
    j.tool(name, t.execute, { description: t.description ?? '', schema });
    sdkTools[name] = {
      ...t,
      onInputAvailable: ({ toolCallId, input }) => answers.get(toolCallId)?.accepted.set(toolCallId, { name, input }),
      execute: (_input, { toolCallId }) => park(toolCallId),
    };
  }

  function park(id) {
    const answer = answers.get(id);
    if (!answer?.finished || !answer.accepted.has(id)) {
      throw new Error(`tool call ${id}: its answer is not complete yet (this adapter needs ai 6's dispatch after finish)`);
    }
    return new Promise((resolve, reject) => {
      answer.parked.set(id, { resolve, reject });
      if (answer.parked.size === answer.accepted.size) run(answer);
    });
  }

  async function run(answer) {
    for (const id of answer.calls) answers.delete(id);
    // Model order; the SDK's parsed input (what its own execute would have been given).
    const batch = answer.calls
      .filter((id) => answer.accepted.has(id))
      .map((id) => ({ id, name: answer.accepted.get(id).name, arguments: answer.accepted.get(id).input }));
    try {
      const results = await j.step(batch, answer.text ? { text: answer.text } : {});
      for (const r of results) {
        const { resolve, reject } = answer.parked.get(r.callId);
        // A failed call throws: the SDK then records a tool error (the step's `tool-error` part)
        // and sends the model the message as is, which is the journal's content ("CODE: ...").
        if (r.ok) resolve(r.content);
        else reject(new Error(r.content));
      }
    } catch (err) {
      for (const { reject } of answer.parked.values()) reject(err); // StepAborted, or the journal failed
    }
  }

  const middleware = {
    specificationVersion: 'v3',
    async wrapStream({ doStream }) {
      const { stream, ...rest } = await doStream();
      const answer = { calls: [], text: '', finished: false, accepted: new Map(), parked: new Map() };
      const watch = new TransformStream({
        transform(part, out) {
          if (part.type === 'text-delta') answer.text += part.delta;
          if (part.type === 'tool-call' && !part.providerExecuted) {
            answer.calls.push(part.toolCallId);
            answers.set(part.toolCallId, answer);
          }
          if (part.type === 'finish') answer.finished = true;
          out.enqueue(part);
        },
      });
      return { stream: stream.pipeThrough(watch), ...rest };
    },
  };
  return { tools: sdkTools, middleware };
}

/** Runs `prompt` to the end, journaling every tool call at `journal`; closes the journal. */
export async function runAgent({ baseURL, apiKey, model = 'gpt-4o-mini', journal, workspace, prompt = DEFAULT_PROMPT }) {
  await mkdir(workspace, { recursive: true });
  const notes = path.join(workspace, 'notes.txt');
  const j = await Journal.create(journal, { workspace });
  try {
    const { tools, middleware } = await journaled(j, {
      append_note: tool({
        description: 'Append one note (a line of text) to the notes file.',
        inputSchema: z.object({ text: z.string().describe('The note.') }),
        // `ctx` is tooljournal's: a real notes API would take `ctx.idempotencyKey`, so that a
        // re-run after a crash (same key) cannot write the note twice.
        execute: async ({ text }, ctx) => {
          if (text.includes('\n')) throw new Error('a note is one line');
          await appendFile(notes, `${text}\n`, 'utf8');
          return `noted ${text}`;
        },
      }),
    });
    const provider = createOpenAI({ baseURL, apiKey: apiKey ?? process.env.OPENAI_API_KEY ?? 'sk-mock' });
    j.turn(prompt);
    // The SDK sends the tool results back in the next request itself, paired with the call ids.
    const result = streamText({
      model: wrapLanguageModel({ model: provider.chat(model), middleware }),
      tools,
      prompt,
      stopWhen: stepCountIs(5),
      maxRetries: 0,
    });
    for await (const part of result.fullStream) {
      if (part.type === 'error') throw part.error; // a provider error; a tool's is a `tool-error` part
    }
    const steps = await result.steps;
    const last = steps.at(-1);
    // The final answer goes into the journal's history too (a step with no calls).
    if (last && last.toolCalls.length === 0) await j.step([], { text: last.text });
    return { text: last?.text ?? '', steps };
  } finally {
    await j.close();
  }
}

async function cli() {
  process.exitCode = 1; // until the answer is printed: a run whose step never settled must not exit 0
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      'base-url': { type: 'string', default: process.env.OPENAI_BASE_URL },
      'api-key': { type: 'string', default: process.env.OPENAI_API_KEY },
      model: { type: 'string', default: 'gpt-4o-mini' },
      journal: { type: 'string', default: process.env.TOOLJOURNAL_JOURNAL },
      workspace: { type: 'string', default: process.env.TOOLJOURNAL_WORKSPACE ?? process.cwd() },
    },
  });
  if (!values['base-url'] || !values.journal) {
    console.error('usage: ai-sdk-agent.mjs --base-url URL --journal DIR [--workspace DIR] [--model M] [--api-key K] [PROMPT]');
    process.exit(2);
  }
  const { text } = await runAgent({
    baseURL: values['base-url'],
    apiKey: values['api-key'],
    model: values.model,
    journal: values.journal,
    workspace: values.workspace,
    prompt: positionals[0] ?? DEFAULT_PROMPT,
  });
  console.log(text);
  process.exitCode = 0;
}

if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  cli().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
