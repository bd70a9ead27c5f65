/**
 * tooljournal: durable, crash-truthful tool calls for JavaScript and TypeScript agents.
 *
 * Every transition of every call goes to a checksummed journal, `started` durable before your
 * function runs. After a crash, `classify` tells which calls provably never started and which
 * may have run, `rebuild` gives a request body the providers accept, and `Journal.resume` runs
 * again only what never started, with the same ids and idempotency keys.
 */

/** The request-body formats `history` and `rebuild` give. */
export type Format = 'openai-chat' | 'openai-responses' | 'anthropic' | 'gemini';
export declare const FORMATS: readonly Format[];

/** A JSON value, as a tool's arguments and results are. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** What a call's body is told. */
export declare class CallContext {
  /** The model's id for the call. */
  readonly callId: string;
  /** The key the call keeps across attempts and re-runs: pass it to the world's APIs. */
  readonly idempotencyKey: string;
  /** The attempt, from 1. */
  readonly attempt: number;
  /** The session's id. */
  readonly sessionId: string;
  /** Aborts when the call's time limit passes or the user stops the step. */
  readonly signal: AbortSignal;
}

/**
 * A tool's body: its arguments (parsed) and its context; what it returns (or resolves with) is
 * the content the model sees (a string as is, anything else as JSON). Throwing (or rejecting)
 * is a failed call, `TOOL_FAILED` with the error's message.
 */
export type ToolFunction<Args = any> = (args: Args, ctx: CallContext) => unknown | Promise<unknown>;

export interface ToolOptions {
  /** What it does, for the model. */
  description?: string;
  /** JSON Schema of its arguments (default: any object). */
  schema?: { [key: string]: Json };
  /** It changes nothing outside the session: plan mode lets it run, and it may overlap its siblings. */
  readOnly?: boolean;
  /** Running it twice does what running it once does: a `RetryableError` is retried, and `rerun: "safe"` may run it again after a crash. */
  idempotent?: boolean;
  /** It may overlap its siblings although it writes. */
  concurrent?: boolean;
  /** Its own time limit, in milliseconds. */
  timeoutMs?: number;
}

/** A function and what the runtime must know of it. */
export declare class Tool<Args = any> {
  readonly name: string;
  readonly fn: ToolFunction<Args>;
  readonly description: string;
  readonly schema: { [key: string]: Json };
  readonly readOnly: boolean;
  readonly idempotent: boolean;
  readonly concurrent: boolean;
  readonly timeoutMs: number | null;
  constructor(name: string, fn: ToolFunction<Args>, options?: ToolOptions);
}

/** Declares a tool without a journal (for `Journal.create`'s and `Journal.resume`'s `tools`). */
export declare function tool<Args = any>(name: string, fn: ToolFunction<Args>, options?: ToolOptions): Tool<Args>;

/** One call of a model's answer, in the plain form. */
export interface ToolCall {
  /** The model's id for it (left out: the journal names it `call_{turn}_{step}_{i}`). */
  id?: string | null;
  /** The tool's name. */
  name: string;
  /** The arguments: JSON text as the model sent it, or a value. */
  arguments?: string | Json;
}

/** One call's result, in model order. */
export interface StepResult {
  callId: string;
  /** The call succeeded. */
  ok: boolean;
  /** What the model sees (an error's begins with its code). */
  content: string;
  /** The error code (`TOOL_FAILED`, `ABORTED_BEFORE_DISPATCH`, ...) when it failed. */
  code: string | null;
}

export interface CreateOptions {
  /** Where the session works (default: the current directory). */
  workspace?: string;
  /** Tools made with `tool(...)`. */
  tools?: Tool[];
  /** "group" (durable, the default), "always", or "never" (tests and benchmarks only). */
  fsync?: 'group' | 'always' | 'never';
  /** Most calls that may overlap run at once (default 8). */
  parallelMax?: number;
  /** Offer the runtime's own tools (bash, the file tools) too. */
  builtins?: boolean;
}

export interface ResumeOptions {
  /** The session's tools: the re-run runs calls of these. */
  tools?: Tool[];
  /** Which interrupted calls run again: "not-started" (the default), "safe", or null (none). */
  rerun?: 'not-started' | 'safe' | 'none' | null;
  /** Kill process groups the crashed run left running (refused otherwise). */
  killOrphans?: boolean;
  /** Take a PostgreSQL session from a live lease holder. */
  steal?: boolean;
  /** Offer the runtime's own tools too. */
  builtins?: boolean;
}

export interface StepOptions {
  /** The assistant's text that came with the calls. */
  text?: string;
  /** Aborting it stops the step, as `journal.abort()` does. */
  signal?: AbortSignal;
}

/** One session's journal, held by this process until `close`. */
export declare class Journal {
  private constructor();
  /** A new session journaled at `location` (a directory, or `postgres://…?session=ID`); the writer lock is taken first. */
  static create(location: string, options?: CreateOptions): Promise<Journal>;
  /** Takes up the session at `location` as `tooljournal resume` does, then re-runs what the choice picked, once. */
  static resume(location: string, options?: ResumeOptions): Promise<Journal>;
  /** The results of the calls `resume` ran again (empty for a new session). */
  rerunResults: StepResult[];
  /** Registers a tool (before the first turn). */
  tool<Args = any>(name: string, fn: ToolFunction<Args>, options?: ToolOptions): Tool<Args>;
  /** Registers a `Tool` made by `tool(...)`. */
  addTool(tool: Tool): void;
  /** Starts a turn with the user's prompt; returns its number. */
  turn(prompt: string): number;
  /**
   * Runs one model answer's calls (the plain form, or a provider's raw response in any of the
   * four formats); one result per call, in model order. Rejects with `StepAborted` when the
   * user stopped it.
   */
  step(calls: ToolCall[] | { [key: string]: unknown }, options?: StepOptions): Promise<StepResult[]>;
  /** Stops the step in progress, as the CLI's Ctrl-C does. */
  abort(): void;
  /** The session so far as a complete request body in `format` (add your `model` to send it). */
  history(format: Format): { [key: string]: any };
  /** The session's id. */
  readonly sessionId: string;
  /** Where the journal is (a URL without its secrets). */
  readonly location: string;
  /** Ends the open turn, writes `session/close`, syncs, and lets the lock go. */
  close(): Promise<void>;
}

/** One call of a journal, as `recover classify` gives it. */
export interface ClassifiedCall {
  callId: string;
  tool: string;
  /** The last state journaled: received, parsed, approved, started, settled, committed, rejected, ... */
  state: string;
  /** For an unfinished call: whether it provably never started, or may have run. */
  classification: null | 'TOOL_NOT_STARTED' | 'TOOL_OUTCOME_UNKNOWN';
  turn: number;
  step: number;
  resources: unknown[];
  [key: string]: unknown;
}

export interface ReadOptions {
  /** Balance a crashed journal as `recover` does (cut its torn tail, append one `recovery` event). Default: read only. */
  balance?: boolean;
}

/** Every call of the journal at `location`, classified. */
export declare function classify(location: string, options?: ReadOptions): ClassifiedCall[];
/** The journal at `location` as a complete request body for `format`. */
export declare function rebuild(location: string, format: Format, options?: ReadOptions): { [key: string]: any };
/** `recover audit --json` of the journal at `location`. */
export declare function audit(location: string, options?: ReadOptions): { [key: string]: any };
/** A provider's response read as `step` reads it. */
export declare function readResponse(response: { [key: string]: unknown }): {
  text: string;
  calls: { id: string | null; name: string; arguments: string }[];
};

/** A tooljournal failure; `code` is the exit code the CLI gives the same failure. */
export declare class TooljournalError extends Error {
  code: number;
}
/** Another process holds the journal. */
export declare class JournalLocked extends TooljournalError {}
/** The journal's bytes are damaged (code 2). */
export declare class Corrupt extends TooljournalError {}
/** A newer tooljournal wrote the journal (code 3). */
export declare class NewerSchema extends TooljournalError {}
/** The journal cannot be resumed as it is. */
export declare class Refused extends TooljournalError {}
/** The API was used wrongly. */
export declare class UsageError extends TooljournalError {}
/** I/O, the store or the runtime failed. */
export declare class Failed extends TooljournalError {}
/** The user stopped the step; `results` holds each call's result. Its `name` is "AbortError". */
export declare class StepAborted extends TooljournalError {
  results: StepResult[];
}
/** Throw it from an idempotent tool for a failure worth another attempt. */
export declare class RetryableError extends Error {
  readonly retryable: true;
  constructor(message?: string);
}
