'use strict';
/**
 * tooljournal: durable, crash-truthful tool calls for JavaScript and TypeScript agents.
 *
 * Every transition of every call (received, parsed, approved, started, settled, committed) goes
 * to a checksummed journal, `started` durable before your function runs. After a crash,
 * `classify` tells which calls provably never started and which may have run, `rebuild` gives a
 * request body the providers accept, and `Journal.resume` runs again only what never started,
 * with the same ids and idempotency keys.
 *
 * The engine is tooljournal's Rust runtime (`tooljournal.node`, built from `src/`): the journal a
 * Node session writes is the one the `tooljournal` and `recover` binaries and the Python package
 * read, and the other way round. This file gives the native half its public shape; it holds no
 * rule of its own about calls.
 */

const path = require('node:path');

const native = loadNative();

function loadNative() {
  const file = process.env.TOOLJOURNAL_NODE_ADDON || path.join(__dirname, 'tooljournal.node');
  try {
    return require(file);
  } catch (err) {
    const hint = `the native module ${file} could not be loaded: build it with \`npm run build\` in ${__dirname}`;
    throw new Error(`${hint} (${err && err.message})`);
  }
}

/** The request-body formats `history` and `rebuild` give. */
const FORMATS = Object.freeze(['openai-chat', 'openai-responses', 'anthropic', 'gemini']);

// -- errors ---------------------------------------------------------------------------------

/** A tooljournal failure; `code` is the exit code the CLI gives the same failure. */
class TooljournalError extends Error {
  constructor(message, code = 1) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}
/** Another process holds the journal (its writer lock, or a live PostgreSQL lease). */
class JournalLocked extends TooljournalError {}
/** The journal's bytes are damaged (exit code 2). */
class Corrupt extends TooljournalError {}
/** A newer tooljournal wrote the journal (exit code 3). */
class NewerSchema extends TooljournalError {}
/** The journal cannot be resumed as it is (orphans running, nothing to resume). */
class Refused extends TooljournalError {}
/** The API was used wrongly: a bad argument, a call out of order. */
class UsageError extends TooljournalError {}
/** I/O, the store or the runtime failed. */
class Failed extends TooljournalError {}

const ERRORS = { JournalLocked, Corrupt, NewerSchema, Refused, UsageError, Failed };

/**
 * The user stopped a step (`journal.abort()`, or the `signal` given to `step`): the step and
 * its turn were journaled as cancelled. `results` holds each call's result (`ABORTED`,
 * `ABORTED_BEFORE_DISPATCH`, or what a call that finished gave).
 */
class StepAborted extends TooljournalError {
  constructor(results) {
    super('stopped by the user: the step and its turn were journaled as cancelled');
    this.name = 'AbortError';
    this.results = results;
  }
}

/**
 * Throw it from an idempotent tool for a failure worth another attempt (a timeout, a rate
 * limit): the runtime retries it within the call. From any other tool it is a plain failure.
 */
class RetryableError extends Error {
  constructor(message) {
    super(message);
    this.name = 'RetryableError';
    this.retryable = true;
  }
}

function typed(kind, message, code) {
  const Class = ERRORS[kind] || Failed;
  return new Class(message, code);
}

/** Calls the native module; its failures become the package's error classes. */
function call(fn) {
  try {
    return fn();
  } catch (err) {
    const text = err && typeof err.message === 'string' ? err.message : '';
    if (text.startsWith('tooljournal:')) {
      const { kind, message, code } = JSON.parse(text.slice('tooljournal:'.length));
      throw typed(kind, message, code);
    }
    if (err && (err.code === 'InvalidArg' || err.code === 'NumberExpected' || err.code === 'StringExpected')) {
      throw new UsageError(err.message);
    }
    throw err;
  }
}

// -- tools ----------------------------------------------------------------------------------

/**
 * A function and what the runtime must know of it. `readOnly`: it changes nothing outside the
 * session (it may overlap its siblings). `idempotent`: running it twice does what running it
 * once does (a `RetryableError` is retried; `rerun: "safe"` may run it again after a crash).
 * `concurrent`: it may overlap its siblings although it writes.
 */
class Tool {
  constructor(name, fn, options = {}) {
    if (typeof name !== 'string' || name === '') {
      throw new UsageError(`tool name ${JSON.stringify(name)}: a non-empty string`);
    }
    if (typeof fn !== 'function') {
      throw new UsageError(`tool \`${name}\`: its body is not a function`);
    }
    const known = ['description', 'schema', 'readOnly', 'idempotent', 'concurrent', 'timeoutMs'];
    for (const key of Object.keys(options)) {
      if (!known.includes(key)) {
        throw new UsageError(`tool \`${name}\`: unknown option \`${key}\` (one of ${known.join(', ')})`);
      }
    }
    this.name = name;
    this.fn = fn;
    this.description = options.description ?? '';
    this.schema = options.schema ?? { type: 'object' };
    this.readOnly = Boolean(options.readOnly);
    this.idempotent = Boolean(options.idempotent);
    this.concurrent = Boolean(options.concurrent);
    this.timeoutMs = options.timeoutMs ?? null;
  }

  spec() {
    return {
      name: this.name,
      description: this.description,
      schema: JSON.stringify(this.schema),
      readOnly: this.readOnly,
      idempotent: this.idempotent,
      concurrent: this.concurrent,
      timeoutMs: this.timeoutMs ?? undefined,
    };
  }
}

/** Declares a tool without a journal (for `Journal.create`'s and `Journal.resume`'s `tools`). */
function tool(name, fn, options) {
  return new Tool(name, fn, options);
}

/**
 * What a call's body is told. `callId` and `idempotencyKey` are the journal's: a re-run after a
 * crash gets the same ones, so pass the key to the world's APIs. `signal` aborts when the call's
 * time limit passes or the user stops the step.
 */
class CallContext {
  constructor(callId, idempotencyKey, attempt, sessionId) {
    this.callId = callId;
    this.idempotencyKey = idempotencyKey;
    this.attempt = attempt;
    this.sessionId = sessionId;
    this._controller = null;
  }

  /** An AbortSignal (made on first use: most bodies never look). */
  get signal() {
    if (this._controller === null) this._controller = new AbortController();
    return this._controller.signal;
  }

  _abort() {
    if (this._controller === null) this._controller = new AbortController();
    this._controller.abort(new StepAbortedReason());
  }
}

class StepAbortedReason extends Error {
  constructor() {
    super('the call was cancelled (its time limit passed, or the user stopped the step)');
    this.name = 'AbortError';
  }
}

/** A body's value as the text the model sees: a string as is, anything else as JSON (what JSON
 * cannot write, a function or a symbol, as `String` writes it). */
function content(value) {
  if (typeof value === 'string') return value;
  if (value === undefined || value === null) return '';
  const json = JSON.stringify(value);
  return json === undefined ? String(value) : json;
}

/** An error's message, whatever was thrown (a value whose `String` itself throws included). */
function messageOf(err) {
  try {
    const message = err instanceof Error ? err.message : String(err);
    return message || (err && err.name) || 'Error';
  } catch {
    return 'a value that cannot be written as text was thrown';
  }
}

// -- the journal ----------------------------------------------------------------------------

// The events the native half sends (src/bridge.rs).
const CALL = 0;
const CANCEL = 1;
const POLL = 2;
// A body's result as `settle` takes it.
const OK = 0;
const FAILED = 1;
const RETRYABLE = 2;
const STOPPED = 3;

/**
 * One session's journal, held by this process until `close` (the writer lock, or a PostgreSQL
 * lease).
 */
class Journal {
  constructor(token) {
    if (token !== PRIVATE) {
      throw new UsageError('use Journal.create(location, options) or Journal.resume(location, options)');
    }
    this._tools = new Map();
    this._calls = new Map();
    // The operation in flight (a step or a resume): one at a time.
    this._op = null;
    this._nextOp = 1;
    this._stopping = false;
    // The native half holds its dispatch function for good; the function holds this journal
    // weakly, so a journal dropped without `close` can still be collected (and its lock let go).
    const self = new WeakRef(this);
    this._native = new native.NativeJournal((kind, id, a, b, c, d, e, n) => self.deref()?._event(kind, id, a, b, c, d, e, n));
    /** The results of the calls `resume` ran again (empty for a new session). */
    this.rerunResults = [];
  }

  /**
   * A new session journaled at `location` (a directory, or `postgres://…?session=ID`). The
   * writer lock is taken first: a journal another process holds rejects with `JournalLocked`,
   * one that holds a session already with `Refused` (resume it).
   */
  static async create(location, options = {}) {
    const j = new Journal(PRIVATE);
    const { workspace = process.cwd(), tools = [], fsync = 'group', parallelMax = 8, builtins = false } = options;
    // Registered with the journal's creation: a tool refused leaves nothing held or written.
    const specs = tools.map((t) => j._register(t));
    call(() => j._native.create(String(location), String(workspace), fsync, parallelMax, builtins, specs));
    return j;
  }

  /**
   * Takes up the session at `location` as `tooljournal resume` does: recovery under the lock,
   * the journaled policy, orphaned processes refused (or killed with `killOrphans`), then the
   * calls the re-run choice picked (`rerun`: "not-started", the default, "safe", or null) run
   * once with their journaled ids and keys; their results are in `rerunResults`. `tools` are the
   * session's tools. The journal is then open for new turns.
   */
  static async resume(location, options = {}) {
    const j = new Journal(PRIVATE);
    const { tools = [], rerun = 'not-started', killOrphans = false, steal = false, builtins = false } = options;
    const specs = tools.map((t) => j._register(t));
    const { value } = await j._fly((req) =>
      j._native.resume(req, String(location), specs, rerun ?? undefined, killOrphans, steal, builtins),
    );
    j.rerunResults = value;
    return j;
  }

  /** Registers a tool (before the first turn: the session's opening journals its tools). */
  tool(name, fn, options = {}) {
    const t = new Tool(name, fn, options);
    this.addTool(t);
    return t;
  }

  /** Registers a `Tool` made by `tool(...)`. */
  addTool(t) {
    const spec = this._register(t);
    try {
      call(() => this._native.tool(spec));
    } catch (err) {
      this._tools.delete(t.name);
      throw err;
    }
  }

  _register(t) {
    if (!(t instanceof Tool)) throw new UsageError(`${String(t)}: not a Tool (make it with tool(name, fn, options))`);
    if (this._tools.has(t.name)) throw new UsageError(`tool \`${t.name}\`: registered twice`);
    this._tools.set(t.name, t);
    return t.spec();
  }

  /** Starts a turn with the user's prompt (ending the open one, completed); returns its number. */
  turn(prompt) {
    return call(() => this._native.turn(String(prompt)));
  }

  /**
   * Runs one model answer's calls; resolves with one result per call, in model order
   * (`{callId, ok, content, code}`). `calls` is a list of `{id, name, arguments}` (arguments as
   * JSON text or a value), or a provider's raw response in any of the four formats. Each call's
   * `started` is durable before its function runs; calls of tools that may overlap run together.
   * A tool that throws is a failed call (`TOOL_FAILED`) with its message. `abort()`, or `signal`
   * aborting, stops the step as the CLI's Ctrl-C does, and the promise rejects with a
   * `StepAborted` (name `AbortError`) once that is journaled.
   */
  async step(calls, options = {}) {
    const { text, signal } = options;
    let plain;
    let response;
    if (Array.isArray(calls)) {
      plain = calls.map(plainCall);
    } else if (calls !== null && typeof calls === 'object') {
      response = JSON.stringify(calls);
    } else {
      throw new UsageError('step takes a list of calls or a provider\'s response object');
    }
    // Refused before anything of the step in flight is touched (its stop, its signal).
    if (this._op !== null) throw new UsageError('a step or resume of this journal is in flight: await it first');
    const onAbort = () => this.abort();
    try {
      const before = Boolean(signal && signal.aborted);
      this._stopping = before;
      // Listening before the step starts: a body may abort the signal in the first poll.
      if (signal && !before) signal.addEventListener('abort', onAbort, { once: true });
      const { value, stopped } = await this._fly((req) => this._native.step(req, plain, response, text, before));
      if (stopped) throw new StepAborted(value);
      return value;
    } finally {
      if (signal) signal.removeEventListener('abort', onAbort);
    }
  }

  /**
   * Stops the step in progress: nothing starts after it, running calls' `ctx.signal` aborts,
   * queued ones end `ABORTED_BEFORE_DISPATCH`. Outside a step it stops nothing (the next step
   * starts afresh).
   */
  abort() {
    if (this._op === null) return;
    this._stopping = true;
    this._end(this._native.abort());
  }

  /**
   * The session so far as the request body for `format` ("openai-chat", "openai-responses",
   * "anthropic", "gemini"): what `recover rebuild` gives for this journal. Add your `model` (and
   * `stream`) to send it.
   */
  history(format) {
    return JSON.parse(call(() => this._native.history(String(format))));
  }

  /** The session's id. */
  get sessionId() {
    return call(() => this._native.sessionId());
  }

  /** Where the journal is (a URL without its secrets). */
  get location() {
    return call(() => this._native.location());
  }

  /** Ends the open turn, writes `session/close`, syncs, and lets the lock go. */
  async close() {
    call(() => this._native.close());
  }

  async [Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose')]() {
    await this.close();
  }

  // A step or a resume: it may end at once (every body answered at once) or later, when a
  // body's promise settles (`settle`) or another thread woke it (a POLL event).
  _fly(start) {
    return new Promise((resolve, reject) => {
      if (this._op !== null) {
        // The one in flight keeps its promise; this one is refused.
        reject(new UsageError('a step or resume of this journal is in flight: await it first'));
        return;
      }
      const req = this._nextOp++;
      this._op = { req, resolve, reject };
      let ended;
      try {
        ended = call(() => start(req));
      } catch (err) {
        this._op = null;
        reject(err);
        return;
      }
      this._end(ended);
    });
  }

  // An operation's end, as the native half reports it (null: not yet).
  _end(ended) {
    if (ended === null || ended === undefined) return;
    const { req, value, stopped, error } = JSON.parse(ended);
    const op = this._op;
    if (op === null || op.req !== req) return;
    this._op = null;
    if (error) op.reject(typed(error.kind, error.message, error.code));
    else op.resolve({ value, stopped });
  }

  _event(kind, id, a, b, c, d, e, n) {
    try {
      if (kind === CALL) this._call(id, a, b, c, d, e, n);
      else if (kind === CANCEL) this._calls.get(id)?._abort();
      else if (kind === POLL) this._end(this._native.poll());
    } catch (err) {
      // Never throw into the native side: a body that cannot be called is a failed call.
      if (kind === CALL) this._settle(id, FAILED, `the tool's body could not be called: ${err && err.message}`);
      else if (this._op !== null) {
        const op = this._op;
        this._op = null;
        op.reject(err);
      }
    }
  }

  _call(slot, name, argsText, callId, key, sessionId, attempt) {
    const t = this._tools.get(name);
    if (t === undefined) {
      this._settle(slot, FAILED, `no body for tool \`${name}\` in this process`);
      return;
    }
    const ctx = new CallContext(callId, key, attempt, sessionId);
    this._calls.set(slot, ctx);
    let out;
    try {
      out = t.fn(argsText ? JSON.parse(argsText) : {}, ctx);
    } catch (err) {
      this._fail(slot, err, ctx);
      return;
    }
    if (out !== null && typeof out === 'object' && typeof out.then === 'function') {
      out.then(
        (value) => this._ok(slot, value),
        (err) => this._fail(slot, err, ctx),
      );
    } else {
      this._ok(slot, out);
    }
  }

  _ok(slot, value) {
    let text;
    try {
      text = content(value);
    } catch (err) {
      this._settle(slot, FAILED, `the tool's result cannot be turned into text: ${err && err.message}`);
      return;
    }
    this._settle(slot, OK, text);
  }

  _fail(slot, err, ctx) {
    // A body that gave up because the user stopped the step: the call ends ABORTED.
    if (this._stopping && ctx._controller !== null && ctx._controller.signal.aborted) {
      this._settle(slot, STOPPED, '');
      return;
    }
    let retryable = false;
    try {
      retryable = Boolean(err && err.retryable === true);
    } catch {
      // A getter that throws: not worth another attempt.
    }
    this._settle(slot, retryable ? RETRYABLE : FAILED, messageOf(err));
  }

  _settle(slot, status, text) {
    this._calls.delete(slot);
    this._end(this._native.settle(slot, status, text));
  }
}

const PRIVATE = Symbol('tooljournal.Journal');

function plainCall(c, i) {
  if (c === null || typeof c !== 'object') throw new UsageError(`calls[${i}]: an object with id, name and arguments`);
  if (typeof c.name !== 'string') throw new UsageError(`calls[${i}].name: missing or not a string`);
  if (c.id !== undefined && c.id !== null && typeof c.id !== 'string') throw new UsageError(`calls[${i}].id: not a string`);
  const args = c.arguments === undefined ? '{}' : typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments);
  return { id: c.id ?? undefined, name: c.name, arguments: args };
}

// -- reading --------------------------------------------------------------------------------

function camel(key) {
  return key.replace(/_([a-z])/g, (_, ch) => ch.toUpperCase());
}

/**
 * Every call of the journal at `location`: `callId`, `tool`, `state`, `classification` (null,
 * "TOOL_NOT_STARTED" or "TOOL_OUTCOME_UNKNOWN"), and `turn`, `step`, `resources`. Reads only,
 * unless `balance` (then a crashed journal is balanced as `recover classify` balances it).
 */
function classify(location, options = {}) {
  const read = JSON.parse(call(() => native.classify(String(location), Boolean(options.balance))));
  return read.calls.map((c) => Object.fromEntries(Object.entries(c).map(([k, v]) => [camel(k), v])));
}

/**
 * The journal at `location` as a complete request body for `format`, every unfinished call
 * answered with the truth about it (`recover rebuild`).
 */
function rebuild(location, format, options = {}) {
  return JSON.parse(call(() => native.rebuild(String(location), String(format), Boolean(options.balance))));
}

/** `recover audit --json` of the journal at `location` (its keys as the CLI prints them). */
function audit(location, options = {}) {
  return JSON.parse(call(() => native.audit(String(location), Boolean(options.balance))));
}

/** A provider's response read as `step` reads it: `{text, calls: [{id, name, arguments}]}`. */
function readResponse(response) {
  if (response === null || typeof response !== 'object') throw new UsageError('readResponse takes a provider\'s response object');
  return JSON.parse(call(() => native.readResponse(JSON.stringify(response))));
}

module.exports = {
  Journal,
  Tool,
  CallContext,
  tool,
  classify,
  rebuild,
  audit,
  readResponse,
  FORMATS,
  TooljournalError,
  JournalLocked,
  Corrupt,
  NewerSchema,
  Refused,
  UsageError,
  Failed,
  StepAborted,
  RetryableError,
};
