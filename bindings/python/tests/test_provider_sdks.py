"""The request bodies tooljournal gives are ones the providers' official Python SDKs accept.

Two journals are checked in each of the four formats:

- a live session (``Journal.history``): one turn whose first step has two calls, one that
  succeeds and one whose tool raises (a failed call), and a second step that is only the
  assistant's final text;
- a crashed session (``tooljournal.rebuild``): a child process is SIGKILLed while a call is
  running, after one call of the same step committed and before a third one started, so the
  rebuilt body answers a committed call, a ``TOOL_OUTCOME_UNKNOWN`` one and a
  ``TOOL_NOT_STARTED`` one.

Each body is checked against the SDK's own request types, strictly (no unknown keys anywhere,
every ``Iterable[...]`` field validated item by item), and its top-level keys are bound to the
signature of the SDK method that sends it, so every key must be a real parameter. The bodies
leave out ``model`` by design (``history/src/providers/request.rs``: "everything a provider
needs except the model's name (and, for OpenAI and Anthropic, ``stream``)"); the checks add it
as a caller does. The negative tests show each check rejects a body broken on purpose.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List

import pytest
from pydantic import TypeAdapter, ValidationError
from pydantic_core import SchemaValidator

import tooljournal

MODEL = {
    "openai-chat": "gpt-4o-mini",
    "openai-responses": "gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
}
#: A client pointed at a closed port: nothing here is ever sent.
NOWHERE = "http://127.0.0.1:9"

NOTE_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}


class BodyRejected(AssertionError):
    """A check of ours (not the SDK's pydantic or signature) refused the body."""


# -- strict validation of the SDKs' TypedDicts ------------------------------------------------


def _harden(node: Any) -> None:
    """Makes a pydantic core schema strict in place: every TypedDict forbids unknown keys
    (TypedDicts take no ``extra`` config through ``TypeAdapter``), and every ``Iterable[...]``
    (a lazy generator schema, which would validate nothing until consumed) becomes a list
    validated now."""
    if isinstance(node, dict):
        kind = node.get("type")
        if kind == "typed-dict":
            node["extra_behavior"] = "forbid"
        elif kind == "generator":
            node["type"] = "list"
        for value in node.values():
            _harden(value)
    elif isinstance(node, list):
        for value in node:
            _harden(value)


@functools.lru_cache(maxsize=None)
def strict_validator(tp: Any) -> SchemaValidator:
    schema = copy.deepcopy(TypeAdapter(tp).core_schema)
    _harden(schema)
    return SchemaValidator(schema)


def validate_strict(tp: Any, value: Any) -> Any:
    """``value`` validated as ``tp`` with no coercion and no unknown key; the result must be
    the input itself (nothing dropped or converted)."""
    validated = strict_validator(tp).validate_python(value, strict=True)
    if validated != value:
        raise BodyRejected(f"{getattr(tp, '__name__', tp)} changed the value: {validated!r}")
    return validated


def bind(method: Callable[..., Any], request: Dict[str, Any]) -> None:
    """Every top-level key must be a parameter of the SDK method, every required one given
    (``TypeError`` otherwise)."""
    inspect.signature(method).bind(**request)


def with_model(fmt: str, body: Dict[str, Any]) -> Dict[str, Any]:
    request = dict(body)
    request.setdefault("model", MODEL[fmt])
    return request


# -- one validator per format -------------------------------------------------------------------


def check_openai_chat(body: Dict[str, Any]) -> None:
    import openai
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

    request = with_model("openai-chat", body)
    validate_strict(CompletionCreateParamsNonStreaming, request)
    validate_strict(List[ChatCompletionMessageParam], request["messages"])
    for t in request.get("tools", []):
        validate_strict(ChatCompletionToolParam, t)
    client = openai.OpenAI(api_key="x", base_url=NOWHERE)
    bind(client.chat.completions.create, request)


def check_openai_responses(body: Dict[str, Any]) -> None:
    import openai
    from openai.types.responses import FunctionToolParam, ResponseInputParam
    from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

    request = with_model("openai-responses", body)
    validate_strict(ResponseCreateParamsNonStreaming, request)
    validate_strict(ResponseInputParam, request["input"])
    for t in request.get("tools", []):
        validate_strict(FunctionToolParam, t)
    client = openai.OpenAI(api_key="x", base_url=NOWHERE)
    bind(client.responses.create, request)


def check_anthropic(body: Dict[str, Any]) -> None:
    import anthropic
    from anthropic.types import MessageParam, ToolParam
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    request = with_model("anthropic", body)
    validate_strict(MessageCreateParamsNonStreaming, request)
    validate_strict(List[MessageParam], request["messages"])
    for t in request.get("tools", []):
        validate_strict(ToolParam, t)
    client = anthropic.Anthropic(api_key="x", base_url=NOWHERE)
    bind(client.messages.create, request)


def _gemini_model(model_cls: Any, value: Any) -> Any:
    """``value`` as google-genai's pydantic model (extra='forbid'), which must dump back to
    exactly ``value`` (nothing dropped, renamed or converted)."""
    if not isinstance(value, dict):
        raise BodyRejected(f"{model_cls.__name__}: not an object: {value!r}")
    parsed = model_cls.model_validate(value)
    again = parsed.model_dump(mode="json", by_alias=True, exclude_none=True)
    if again != value:
        raise BodyRejected(f"{model_cls.__name__} round trip differs: {again!r} != {value!r}")
    return parsed


def _gemini_list(model_cls: Any, value: Any) -> List[Any]:
    if not isinstance(value, list):
        raise BodyRejected(f"expected a list of {model_cls.__name__}, got {value!r}")
    return [_gemini_model(model_cls, item) for item in value]


def check_gemini(body: Dict[str, Any]) -> None:
    from google import genai
    from google.genai import types

    # The REST body's top-level keys, each mapped to the SDK type that models it; any other
    # key fails.
    known = {
        "contents": lambda v: _gemini_list(types.Content, v),
        "tools": lambda v: _gemini_list(types.Tool, v),
        "systemInstruction": lambda v: _gemini_model(types.Content, v),
        "generationConfig": lambda v: _gemini_model(types.GenerationConfig, v),
    }
    unknown = sorted(set(body) - set(known))
    if unknown:
        raise BodyRejected(f"gemini body has top-level keys no SDK type maps: {unknown}")
    if "contents" not in body:
        raise BodyRejected("gemini body has no contents")
    parsed = {key: known[key](value) for key, value in body.items()}

    # And as the SDK's call takes it: contents, plus the rest in GenerateContentConfig.
    config: Dict[str, Any] = {}
    if "tools" in parsed:
        config["tools"] = parsed["tools"]
    if "systemInstruction" in parsed:
        config["system_instruction"] = parsed["systemInstruction"]
    if "generationConfig" in parsed:
        config.update(parsed["generationConfig"].model_dump(exclude_none=True))
    client = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=NOWHERE))
    bind(
        client.models.generate_content,
        {
            "model": MODEL["gemini"],
            "contents": parsed["contents"],
            "config": types.GenerateContentConfig(**config),
        },
    )


CHECKS: Dict[str, Callable[[Dict[str, Any]], None]] = {
    "openai-chat": check_openai_chat,
    "openai-responses": check_openai_responses,
    "anthropic": check_anthropic,
    "gemini": check_gemini,
}
REJECTIONS = (ValidationError, TypeError, BodyRejected)


def test_every_format_has_a_check():
    assert set(CHECKS) == set(tooljournal.FORMATS)


# -- what the bodies say -------------------------------------------------------------------------


def calls_and_results(fmt: str, body: Dict[str, Any]):
    """The body's tool calls ``[(id, name)]`` and results ``{id: (text, is_error or None)}``,
    read in the format's own terms."""
    calls, results = [], {}
    if fmt == "openai-chat":
        for m in body["messages"]:
            for tc in m.get("tool_calls", []):
                calls.append((tc["id"], tc["function"]["name"]))
            if m["role"] == "tool":
                results[m["tool_call_id"]] = (m["content"], None)
    elif fmt == "openai-responses":
        for item in body["input"]:
            if item.get("type") == "function_call":
                calls.append((item["call_id"], item["name"]))
            elif item.get("type") == "function_call_output":
                results[item["call_id"]] = (item["output"], None)
    elif fmt == "anthropic":
        for m in body["messages"]:
            for block in m["content"] if isinstance(m["content"], list) else []:
                if block["type"] == "tool_use":
                    calls.append((block["id"], block["name"]))
                elif block["type"] == "tool_result":
                    results[block["tool_use_id"]] = (block["content"], block.get("is_error"))
    elif fmt == "gemini":
        for c in body["contents"]:
            for part in c["parts"]:
                if "functionCall" in part:
                    calls.append((part["functionCall"]["id"], part["functionCall"]["name"]))
                if "functionResponse" in part:
                    r = part["functionResponse"]
                    results[r["id"]] = (r["response"]["content"], r["response"].get("is_error"))
    return calls, results


# -- the live session ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """One turn: step 1 = a call that succeeds and one that raises; step 2 = final text.
    Returns ``{format: j.history(format)}`` taken while the session is open."""
    root = tmp_path_factory.mktemp("live")
    workspace = root / "ws"
    workspace.mkdir()
    j = tooljournal.Journal.create(root / "journal", workspace=workspace)

    @j.tool("append_note", description="Append a line to notes.txt.", schema=NOTE_SCHEMA)
    def append_note(args, ctx):
        with open(workspace / "notes.txt", "a") as f:
            f.write(args["text"] + "\n")
        return {"appended": args["text"]}

    @j.tool("explode", description="Always fails.", schema={"type": "object", "properties": {}})
    def explode(args, ctx):
        raise RuntimeError("the fuse blew")

    try:
        j.turn("Write 'hello' in the notes, then try explode.")
        results = j.step(
            [
                {"id": "call_ok", "name": "append_note", "arguments": {"text": "hello"}},
                {"id": "call_bad", "name": "explode", "arguments": "{}"},
            ],
            text="Writing the note and trying explode.",
        )
        assert [(r["call_id"], r["ok"]) for r in results] == [("call_ok", True), ("call_bad", False)]
        assert results[1]["code"] == "TOOL_FAILED" and "the fuse blew" in results[1]["content"]
        assert j.step([], text="Done: the note is written; explode failed.") == []
        bodies = {fmt: j.history(fmt) for fmt in tooljournal.FORMATS}
    finally:
        j.close()
    assert (workspace / "notes.txt").read_text() == "hello\n"
    return bodies


# -- the crashed session -------------------------------------------------------------------------

CHILD = r"""
import os, sys, time
import tooljournal

journal, workspace, marker = sys.argv[1:4]
j = tooljournal.Journal.create(journal, workspace=workspace)

@j.tool("append_note", description="Append a line to notes.txt.",
        schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
def append_note(args, ctx):
    with open(os.path.join(workspace, "notes.txt"), "a") as f:
        f.write(args["text"] + "\n")
    return "noted"

@j.tool("deploy", description="Deploys; takes forever.", schema={"type": "object", "properties": {}})
def deploy(args, ctx):
    with open(marker + ".tmp", "w") as f:
        f.write(ctx.call_id)
    os.replace(marker + ".tmp", marker)
    while True:
        time.sleep(1)

j.turn("Note 'before', deploy, note 'after'.")
j.step([
    {"id": "call_before", "name": "append_note", "arguments": {"text": "before"}},
    {"id": "call_deploy", "name": "deploy", "arguments": {}},
    {"id": "call_after", "name": "append_note", "arguments": {"text": "after"}},
], text="On it.")
print("the step returned: the tool was meant to hang", flush=True)
"""


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    """A journal whose writer was SIGKILLed while ``call_deploy`` ran: ``call_before``
    committed, ``call_after`` never started. Returns ``{format: rebuild(path, format)}``."""
    root = tmp_path_factory.mktemp("crashed")
    workspace = root / "ws"
    workspace.mkdir()
    journal, marker = root / "journal", root / "started.marker"
    log = open(root / "child.log", "w+")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(journal), str(workspace), str(marker)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            if child.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"the child never reached the hanging call (exit {child.poll()}):\n{log.read()}")
            time.sleep(0.01)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait()
        log.close()
    assert child.returncode == -signal.SIGKILL
    assert marker.read_text() == "call_deploy"
    assert (workspace / "notes.txt").read_text() == "before\n"

    calls = {c["call_id"]: c for c in tooljournal.classify(journal)}
    assert list(calls) == ["call_before", "call_deploy", "call_after"]
    assert (calls["call_before"]["state"], calls["call_before"]["classification"]) == ("committed", None)
    assert (calls["call_deploy"]["state"], calls["call_deploy"]["classification"]) == (
        "started",
        "TOOL_OUTCOME_UNKNOWN",
    )
    # Never dispatched: how far it got before (approved, today) is the runtime's business.
    assert calls["call_after"]["classification"] == "TOOL_NOT_STARTED"
    assert calls["call_after"]["state"] in ("received", "parsed", "approved")
    return {fmt: tooljournal.rebuild(journal, fmt) for fmt in tooljournal.FORMATS}


# -- the tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", tooljournal.FORMATS)
def test_live_history_is_accepted_by_the_sdk(live, fmt):
    body = live[fmt]
    calls, results = calls_and_results(fmt, body)
    assert calls == [("call_ok", "append_note"), ("call_bad", "explode")]
    assert set(results) == {"call_ok", "call_bad"}
    assert json.loads(results["call_ok"][0]) == {"appended": "hello"}
    assert results["call_bad"][0].startswith("TOOL_FAILED") and "the fuse blew" in results["call_bad"][0]
    if fmt in ("anthropic", "gemini"):
        assert (results["call_ok"][1], results["call_bad"][1]) == (False, True)
    # The final assistant text is the body's last message.
    last_text = json.dumps(
        {
            "openai-chat": lambda b: b["messages"][-1],
            "openai-responses": lambda b: b["input"][-1],
            "anthropic": lambda b: b["messages"][-1],
            "gemini": lambda b: b["contents"][-1],
        }[fmt](body)
    )
    assert "Done: the note is written" in last_text
    CHECKS[fmt](body)


@pytest.mark.parametrize("fmt", tooljournal.FORMATS)
def test_rebuilt_crashed_journal_is_accepted_by_the_sdk(crashed, fmt):
    body = crashed[fmt]
    calls, results = calls_and_results(fmt, body)
    assert [c[0] for c in calls] == ["call_before", "call_deploy", "call_after"]
    assert set(results) == {"call_before", "call_deploy", "call_after"}
    assert results["call_before"][0] == "noted"
    assert results["call_deploy"][0].startswith("TOOL_OUTCOME_UNKNOWN")
    assert results["call_after"][0].startswith("TOOL_NOT_STARTED")
    if fmt in ("anthropic", "gemini"):
        assert [results[c][1] for c in ("call_before", "call_deploy", "call_after")] == [False, True, True]
    CHECKS[fmt](body)


def _drop(path: List[Any], key: str):
    def mutate(body):
        node = body
        for p in path:
            node = node[p]
        del node[key]

    return mutate


def _set(path: List[Any], key: str, value: Any):
    def mutate(body):
        node = body
        for p in path:
            node = node[p]
        node[key] = value

    return mutate


def _index(fmt: str, body: Dict[str, Any], pred: Callable[[Dict[str, Any]], bool]) -> int:
    items = body["input"] if fmt == "openai-responses" else body.get("messages") or body["contents"]
    return next(i for i, item in enumerate(items) if pred(item))


BROKEN = [
    # (format, what is broken, how)
    (
        "openai-chat",
        "a tool message without tool_call_id",
        lambda b: _drop(["messages", _index("openai-chat", b, lambda m: m["role"] == "tool")], "tool_call_id")(b),
    ),
    (
        "openai-chat",
        "a tool message with a key the SDK does not know (is_error)",
        lambda b: _set(["messages", _index("openai-chat", b, lambda m: m["role"] == "tool")], "is_error", True)(b),
    ),
    (
        "openai-chat",
        "a tool call whose type is not function",
        lambda b: _set(
            ["messages", _index("openai-chat", b, lambda m: "tool_calls" in m), "tool_calls", 0], "type", "tool"
        )(b),
    ),
    ("openai-chat", "an unknown top-level key (input)", lambda b: b.update(input=[])),
    # (The installed SDK makes a function_call_output's call_id optional, so its absence is no
    # test of the checks; a function_call's call_id is required.)
    (
        "openai-responses",
        "a function_call without call_id",
        lambda b: _drop(["input", _index("openai-responses", b, lambda m: m.get("type") == "function_call")], "call_id")(
            b
        ),
    ),
    (
        "openai-responses",
        "a function_call whose arguments are an object, not JSON text",
        lambda b: _set(
            ["input", _index("openai-responses", b, lambda m: m.get("type") == "function_call")], "arguments", {}
        )(b),
    ),
    (
        "openai-responses",
        "a function_call_output as a chat tool message",
        lambda b: _set(
            ["input", _index("openai-responses", b, lambda m: m.get("type") == "function_call_output")], "role", "tool"
        )(b),
    ),
    ("openai-responses", "an unknown top-level key (messages)", lambda b: b.update(messages=[])),
    (
        "anthropic",
        "a message with role tool",
        lambda b: _set(["messages", 2], "role", "tool")(b),
    ),
    (
        "anthropic",
        "a tool_result keyed tool_call_id instead of tool_use_id",
        lambda b: (
            b["messages"][2]["content"][0].__setitem__(
                "tool_call_id", b["messages"][2]["content"][0].pop("tool_use_id")
            )
        ),
    ),
    ("anthropic", "no max_tokens", lambda b: b.pop("max_tokens")),
    ("anthropic", "an unknown top-level key (tool_config)", lambda b: b.update(tool_config={})),
    (
        "gemini",
        "a part with an unknown kind (toolResult)",
        lambda b: b["contents"][2]["parts"].append({"toolResult": {"id": "call_ok"}}),
    ),
    (
        "gemini",
        "a functionResponse whose response is not an object",
        lambda b: _set(["contents", 2, "parts", 0, "functionResponse"], "response", "ok")(b),
    ),
    ("gemini", "an unknown top-level key (messages)", lambda b: b.update(messages=[])),
    ("gemini", "no contents", lambda b: b.pop("contents")),
]


@pytest.mark.parametrize("fmt,what,mutate", BROKEN, ids=[f"{f}: {w}" for f, w, _ in BROKEN])
def test_the_checks_reject_a_broken_body(live, fmt, what, mutate):
    body = copy.deepcopy(live[fmt])
    CHECKS[fmt](copy.deepcopy(body))  # whole, it passes
    mutate(body)
    assert body != live[fmt], "the mutation changed nothing"
    with pytest.raises(REJECTIONS):
        CHECKS[fmt](body)


@pytest.mark.parametrize("fmt", ["openai-chat", "openai-responses", "anthropic"])
def test_signature_binding_alone_rejects_unknown_and_missing_keys(live, fmt):
    import anthropic
    import openai

    method = {
        "openai-chat": lambda: openai.OpenAI(api_key="x", base_url=NOWHERE).chat.completions.create,
        "openai-responses": lambda: openai.OpenAI(api_key="x", base_url=NOWHERE).responses.create,
        "anthropic": lambda: anthropic.Anthropic(api_key="x", base_url=NOWHERE).messages.create,
    }[fmt]()
    request = with_model(fmt, live[fmt])
    bind(method, request)
    with pytest.raises(TypeError):
        bind(method, {**request, "not_a_parameter": 1})
    if fmt != "openai-responses":  # Responses takes no required parameter at all
        with pytest.raises(TypeError):
            bind(method, {k: v for k, v in request.items() if k != "model"})
