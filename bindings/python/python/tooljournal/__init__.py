"""tooljournal: durable, crash-truthful tool calls for Python agents.

Every transition of every call (received, parsed, approved, started, settled, committed) goes
to a checksummed journal, ``started`` durable before your function runs. After a crash,
``classify`` tells which calls provably never started and which may have run, ``rebuild``
gives a request body the providers accept, and ``Journal.resume`` runs again only what never
started, with the same ids and idempotency keys.

    j = tooljournal.Journal.create("journal", workspace=".")

    @j.tool("append_note", schema={"type": "object", "properties": {"text": {"type": "string"}}})
    def append_note(args, ctx):
        ...

    j.turn("the user's prompt")
    results = j.step([{"id": "c1", "name": "append_note", "arguments": '{"text": "hi"}'}])
    body = j.history("anthropic")
    j.close()

The engine is tooljournal's Rust runtime (``tooljournal._native``): the journal a Python
session writes is the one the ``tooljournal`` and ``recover`` binaries read, and vice versa.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Union

from . import _native
from ._native import (
    Corrupt,
    Error,
    Failed,
    JournalLocked,
    NewerSchema,
    Refused,
    UsageError,
)

__all__ = [
    "Journal",
    "CallContext",
    "Tool",
    "tool",
    "classify",
    "rebuild",
    "audit",
    "read_response",
    "RetryableError",
    "Error",
    "JournalLocked",
    "Corrupt",
    "NewerSchema",
    "Refused",
    "UsageError",
    "Failed",
    "FORMATS",
]

#: The request-body formats ``history`` and ``rebuild`` give.
FORMATS = ("openai-chat", "openai-responses", "anthropic", "gemini")

#: A step's result: ``{"call_id": str, "ok": bool, "content": str, "code": str | None}``.
Result = Dict[str, Any]


class RetryableError(Exception):
    """Raise it from an idempotent tool for a failure worth another attempt (a timeout, a
    rate limit): the runtime retries it within the call. From any other tool it is a plain
    failure."""

    retryable = True


class CallContext:
    """What a call's body is told.

    ``call_id`` and ``idempotency_key`` are the journal's: a re-run after a crash gets the same
    ones, so pass the key to the world's APIs. ``cancelled`` is live: it turns true when the
    call's time limit passes or the user stops the step.
    """

    __slots__ = ("_native",)

    def __init__(self, native: Any) -> None:
        self._native = native

    @property
    def call_id(self) -> str:
        return self._native.call_id

    @property
    def idempotency_key(self) -> str:
        return self._native.idempotency_key

    @property
    def attempt(self) -> int:
        return self._native.attempt

    @property
    def session_id(self) -> str:
        return self._native.session_id

    @property
    def cancelled(self) -> bool:
        return self._native.cancelled

    def __repr__(self) -> str:
        return f"CallContext(call_id={self.call_id!r}, attempt={self.attempt})"


ToolFunction = Callable[[Dict[str, Any], CallContext], Union[Any, Awaitable[Any]]]


class Tool:
    """A function and what the runtime must know of it."""

    def __init__(
        self,
        fn: ToolFunction,
        name: Optional[str] = None,
        *,
        description: Optional[str] = None,
        schema: Optional[Dict[str, Any]] = None,
        read_only: bool = False,
        idempotent: bool = False,
        concurrent: bool = False,
        timeout_ms: Optional[int] = None,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.description = description if description is not None else (inspect.getdoc(fn) or "")
        self.schema = schema if schema is not None else {"type": "object"}
        self.read_only = read_only
        self.idempotent = idempotent
        self.concurrent = concurrent
        self.timeout_ms = timeout_ms
        self.is_async = inspect.iscoroutinefunction(fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


def tool(
    name: Optional[str] = None,
    *,
    description: Optional[str] = None,
    schema: Optional[Dict[str, Any]] = None,
    read_only: bool = False,
    idempotent: bool = False,
    concurrent: bool = False,
    timeout_ms: Optional[int] = None,
) -> Callable[[ToolFunction], Tool]:
    """Declares a tool without a journal (for ``Journal.create(..., tools=[...])`` and
    ``Journal.resume(..., tools=[...])``).

    ``read_only``: it changes nothing outside the session (it may overlap its siblings).
    ``idempotent``: running it twice does what running it once does (a ``RetryableError`` is
    retried; ``rerun="safe"`` may run it again after a crash). ``concurrent``: it may overlap
    its siblings although it writes. Tools that may overlap run on worker threads; the others
    run on the thread that called ``step``.
    """

    def wrap(fn: ToolFunction) -> Tool:
        return Tool(
            fn,
            name,
            description=description,
            schema=schema,
            read_only=read_only,
            idempotent=idempotent,
            concurrent=concurrent,
            timeout_ms=timeout_ms,
        )

    return wrap


def _content(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value)


class Journal:
    """One session's journal, held by this process until ``close`` (the writer lock, or a
    PostgreSQL lease). Use it as a context manager to close it on the way out."""

    def __init__(self, native: Any, location: str) -> None:
        self._native = native
        self._location = location
        # The loop of the `astep` in progress: its `async def` tools run there.
        self._caller_loop: Optional[asyncio.AbstractEventLoop] = None
        #: The results of the calls ``resume`` ran again (empty for a new session).
        self.rerun_results: List[Result] = []

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        location: Union[str, os.PathLike],
        *,
        workspace: Union[str, os.PathLike, None] = None,
        tools: Iterable[Tool] = (),
        fsync: str = "group",
        parallel_max: int = 8,
        builtins: bool = False,
    ) -> "Journal":
        """A new session journaled at ``location`` (a directory, or ``postgres://…?session=ID``).

        The writer lock is taken first; a journal that holds a session already is refused
        (``Refused``: resume it), one another process holds raises ``JournalLocked``.
        ``workspace`` (default: the current directory) is where the session works.
        ``fsync``: ``"group"`` (durable, the default), ``"always"``, or ``"never"`` (tests and
        benchmarks only). ``builtins`` offers the runtime's own tools (bash, files) too.
        """
        location = os.fspath(location)
        ws = os.fspath(workspace) if workspace is not None else os.getcwd()
        native = _native.NativeJournal.create(location, ws, fsync, parallel_max, builtins)
        journal = cls(native, location)
        for t in tools:
            journal.add_tool(t)
        return journal

    @classmethod
    def resume(
        cls,
        location: Union[str, os.PathLike],
        *,
        tools: Iterable[Tool] = (),
        rerun: Optional[str] = "not-started",
        kill_orphans: bool = False,
        steal: bool = False,
        builtins: bool = False,
    ) -> "Journal":
        """Takes up the session at ``location`` as ``tooljournal resume`` does: recovery
        under the lock, the journaled policy, orphaned processes refused (or killed with
        ``kill_orphans``), then the calls the re-run choice picked run once with their
        journaled ids and keys (``rerun``: ``"not-started"``, ``"safe"`` or ``None``); their
        results are in ``rerun_results``. ``tools`` are the session's tools. The journal is
        then open for new turns."""
        location = os.fspath(location)
        journal = cls.__new__(cls)
        Journal.__init__(journal, None, location)
        decls = [journal._decl(t) for t in tools]
        native, ran = _native.NativeJournal.resume(location, decls, rerun, kill_orphans, steal, builtins)
        journal._native = native
        journal.rerun_results = ran
        return journal

    # -- tools -----------------------------------------------------------------------------

    def tool(
        self,
        name: Optional[str] = None,
        *,
        description: Optional[str] = None,
        schema: Optional[Dict[str, Any]] = None,
        read_only: bool = False,
        idempotent: bool = False,
        concurrent: bool = False,
        timeout_ms: Optional[int] = None,
    ) -> Callable[[ToolFunction], Tool]:
        """Registers the decorated function as a tool (before the first turn: the session's
        opening journals its tools). See ``tooljournal.tool`` for the flags."""

        def register(fn: ToolFunction) -> Tool:
            t = tool(
                name,
                description=description,
                schema=schema,
                read_only=read_only,
                idempotent=idempotent,
                concurrent=concurrent,
                timeout_ms=timeout_ms,
            )(fn)
            self.add_tool(t)
            return t

        return register

    def add_tool(self, t: Tool) -> None:
        """Registers a ``Tool`` (from ``tooljournal.tool``)."""
        self._native.tool(self._decl(t))

    def _decl(self, t: Tool) -> tuple:
        if not isinstance(t, Tool):
            raise TypeError(f"{t!r}: not a tooljournal.Tool (decorate it with tooljournal.tool)")
        return (
            t.name,
            t.description,
            json.dumps(t.schema),
            t.read_only,
            t.idempotent,
            t.concurrent,
            t.timeout_ms,
            self._invoker(t),
        )

    def _invoker(self, t: Tool) -> Callable[[str, Any], str]:
        fn, is_async = t.fn, t.is_async

        def invoke(arguments: str, native_ctx: Any) -> str:
            args = json.loads(arguments) if arguments else {}
            ctx = CallContext(native_ctx)
            if not is_async:
                return _content(fn(args, ctx))
            return _content(self._run_coroutine(fn(args, ctx)))

        return invoke

    def _run_coroutine(self, coroutine: Awaitable[Any]) -> Any:
        loop = self._caller_loop
        if loop is not None:
            # From `astep`: the caller's loop runs it while this thread waits.
            return asyncio.run_coroutine_threadsafe(coroutine, loop).result()
        # From `step`: a loop of its own on this thread (tools that overlap run on several).
        return asyncio.run(coroutine)

    # -- turns and steps -------------------------------------------------------------------

    def turn(self, prompt: str) -> int:
        """Starts a turn with the user's prompt (ending the open one, completed). Returns its
        number."""
        return self._native.turn(prompt)

    def step(self, calls: Any, *, text: Optional[str] = None) -> List[Result]:
        """Runs one model answer's calls and returns one result per call, in model order.

        ``calls`` is a list of ``{"id", "name", "arguments"}`` (arguments as JSON text or a
        dict), or a provider's response as its SDK returns it (a dict, or an SDK object) in
        any of the four formats, whose text and calls are taken. Each call's ``started`` is
        durable before its function runs; calls of tools that may overlap run in parallel.
        A tool that raises is a failed call (``TOOL_FAILED``) with its message. Ctrl-C during
        the step stops it as the CLI does (running calls see ``ctx.cancelled``, queued ones
        end ``ABORTED_BEFORE_DISPATCH``, the turn ends cancelled) and ``KeyboardInterrupt``
        is raised once that is journaled.
        """
        response = _as_response(calls)
        if response is None:
            results, _ = self._native.step(calls=calls, text=text)
        else:
            results, _ = self._native.step(response=json.dumps(response), text=text)
        return results

    async def astep(self, calls: Any, *, text: Optional[str] = None) -> List[Result]:
        """``step`` for async code: the batch runs on a worker thread, ``async def`` tools on
        this event loop. Cancelling the awaiting task stops the step (as ``abort``)."""
        loop = asyncio.get_running_loop()
        self._caller_loop = loop
        future = loop.run_in_executor(None, functools.partial(self.step, calls, text=text))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            self.abort()
            try:
                await future
            except Exception:
                pass
            raise
        finally:
            self._caller_loop = None

    def abort(self) -> None:
        """Stops the step in progress, from any thread: nothing starts after it, running
        calls see ``ctx.cancelled``, queued ones end ``ABORTED_BEFORE_DISPATCH``."""
        self._native.abort()

    # -- reading ---------------------------------------------------------------------------

    def history(self, format: str) -> Dict[str, Any]:
        """The session so far as the request body for ``format`` (``"openai-chat"``,
        ``"openai-responses"``, ``"anthropic"``, ``"gemini"``): what ``recover rebuild``
        gives for this journal. Add your ``model`` (and ``stream``) to send it."""
        return json.loads(self._native.history(format))

    @property
    def session_id(self) -> str:
        return self._native.session_id()

    @property
    def location(self) -> str:
        """Where the journal is (a URL without its secrets)."""
        return self._native.location()

    def close(self) -> None:
        """Ends the open turn, writes ``session/close``, syncs, and lets the lock go."""
        self._native.close()

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _as_response(calls: Any) -> Optional[Dict[str, Any]]:
    """A provider's response as a dict, or None for the plain list of calls."""
    if isinstance(calls, (list, tuple)):
        return None
    if isinstance(calls, dict):
        return calls
    for dump in ("model_dump", "to_json_dict", "to_dict"):
        method = getattr(calls, dump, None)
        if callable(method):
            try:
                return method(mode="json") if dump == "model_dump" else method()
            except TypeError:
                return method()
    raise TypeError(
        f"step takes a list of calls or a provider's response, not {type(calls).__name__}"
    )


def classify(location: Union[str, os.PathLike], *, balance: bool = False) -> List[Dict[str, Any]]:
    """Every call of the journal at ``location``: ``call_id``, ``tool``, ``state``,
    ``classification`` (``None``, ``"TOOL_NOT_STARTED"`` or ``"TOOL_OUTCOME_UNKNOWN"``), and
    ``turn``, ``step``, ``resources``. Reads only, unless ``balance`` (then a crashed journal
    is balanced as ``recover classify`` balances it)."""
    return json.loads(_native.classify(os.fspath(location), balance))["calls"]


def rebuild(location: Union[str, os.PathLike], format: str, *, balance: bool = False) -> Dict[str, Any]:
    """The journal at ``location`` as a complete request body for ``format``, every
    unfinished call answered with the truth about it (``recover rebuild``)."""
    return json.loads(_native.rebuild(os.fspath(location), format, balance))


def audit(location: Union[str, os.PathLike], *, balance: bool = False) -> Dict[str, Any]:
    """``recover audit --json`` of the journal at ``location``: every call with its facts,
    the totals, the token usage."""
    return json.loads(_native.audit(os.fspath(location), balance))


def read_response(response: Any) -> Dict[str, Any]:
    """A provider's response read as ``step`` reads it: ``{"text", "calls": [{"id", "name",
    "arguments"}]}``."""
    as_dict = _as_response(response)
    if as_dict is None:
        raise TypeError("read_response takes a provider's response")
    text, calls = _native.read_response(json.dumps(as_dict))
    return {
        "text": text,
        "calls": [{"id": i, "name": n, "arguments": a} for (i, n, a) in calls],
    }
