"""The package's contract, through the package: tools, turns, steps, results, history,
errors, the async path, the user's stop."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time

import pytest

import tooljournal
from helpers import binary, recover_json, run, start_child, wait_for

NOTE_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}


def note_calls(*texts: str) -> list:
    return [
        {"id": f"c{i}", "name": "append_note", "arguments": json.dumps({"text": t})}
        for i, t in enumerate(texts, 1)
    ]


@pytest.fixture
def paths(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    return tmp_path / "journal", ws


def test_a_step_journals_every_call_and_answers_in_model_order(paths):
    journal, ws = paths
    seen = []
    j = tooljournal.Journal.create(journal, workspace=ws)

    @j.tool("append_note", schema=NOTE_SCHEMA)
    def append_note(args, ctx):
        seen.append((ctx.call_id, ctx.idempotency_key, ctx.attempt, ctx.cancelled))
        with open(ws / "notes.txt", "a") as f:
            f.write(args["text"] + "\n")
        return {"noted": args["text"]}

    j.turn("note three things")
    results = j.step(note_calls("a", "b", "c"))
    assert [r["call_id"] for r in results] == ["c1", "c2", "c3"]
    assert all(r["ok"] and r["code"] is None for r in results)
    assert json.loads(results[1]["content"]) == {"noted": "b"}
    assert (ws / "notes.txt").read_text() == "a\nb\nc\n"
    assert [s[0] for s in seen] == ["c1", "c2", "c3"]
    assert all(s[2] == 1 and s[3] is False for s in seen)
    assert len({s[1] for s in seen}) == 3
    j.close()

    # The recover binary reads what Python wrote, and agrees with the package's reading.
    calls = tooljournal.classify(journal)
    binary_calls = recover_json("classify", str(journal))["calls"]
    assert [(c["call_id"], c["state"], c["classification"]) for c in calls] == [
        (c["call_id"], c["state"], c["classification"]) for c in binary_calls
    ]
    assert [c["state"] for c in calls] == ["committed"] * 3
    # The keys the bodies saw are the ones the journal recorded.
    audited = {c["call_id"]: c["idempotency_key"] for c in tooljournal.audit(journal)["calls"]}
    assert [audited[s[0]] for s in seen] == [s[1] for s in seen]
    verified = run([binary("recover"), "verify", str(journal)])
    assert "clean" in verified.stdout


def test_every_transition_is_journaled_and_started_is_durable_before_the_body(paths):
    journal, ws = paths
    j = tooljournal.Journal.create(journal, workspace=ws)
    states_in_body = []

    @j.tool("probe_tool")
    def probe_tool(args, ctx):
        # Another reader, while the body runs, sees the call started (synced before the body).
        states_in_body.extend(
            c["state"] for c in tooljournal.classify(journal) if c["call_id"] == ctx.call_id
        )
        return "ok"

    j.turn("look")
    j.step([{"id": "p1", "name": "probe_tool", "arguments": "{}"}])
    j.close()
    assert states_in_body == ["started"]
    audit = tooljournal.audit(journal)
    (call,) = audit["calls"]
    assert call["state"] == "committed"
    assert call["decision"], call


def test_a_tool_that_raises_is_a_failed_call_with_its_message_and_the_batch_goes_on(paths):
    journal, ws = paths
    j = tooljournal.Journal.create(journal, workspace=ws)

    @j.tool("flaky")
    def flaky(args, ctx):
        if args.get("fail"):
            raise ValueError("the disk said no")
        return "fine"

    j.turn("go")
    results = j.step(
        [
            {"id": "f1", "name": "flaky", "arguments": {"fail": True}},
            {"id": "f2", "name": "flaky", "arguments": {}},
            {"id": "f3", "name": "nope", "arguments": {}},
        ]
    )
    assert results[0] == {
        "call_id": "f1",
        "ok": False,
        "content": "TOOL_FAILED: the disk said no",
        "code": "TOOL_FAILED",
    }
    assert results[1]["ok"] and results[1]["content"] == "fine"
    assert results[2]["code"] == "UNKNOWN_TOOL"
    j.close()


def test_a_retryable_failure_of_an_idempotent_tool_is_retried_with_the_same_key(paths):
    journal, ws = paths
    attempts = []
    j = tooljournal.Journal.create(journal, workspace=ws)

    @j.tool("fetch", idempotent=True, read_only=True)
    def fetch(args, ctx):
        attempts.append((ctx.attempt, ctx.idempotency_key))
        if ctx.attempt == 1:
            raise tooljournal.RetryableError("rate limited")
        return "fetched"

    j.turn("fetch it")
    (result,) = j.step([{"id": "r1", "name": "fetch", "arguments": {}}])
    j.close()
    assert result["ok"] and result["content"] == "fetched"
    assert [a for a, _ in attempts] == [1, 2]
    assert attempts[0][1] == attempts[1][1]


def test_tools_that_may_overlap_run_in_parallel_and_results_stay_in_model_order(paths):
    journal, ws = paths
    j = tooljournal.Journal.create(journal, workspace=ws)
    inside = []
    both_inside = threading.Event()
    lock = threading.Lock()

    @j.tool("wait_for_sibling", read_only=True)
    def wait_for_sibling(args, ctx):
        with lock:
            inside.append(ctx.call_id)
            if len(inside) == 2:
                both_inside.set()
        # Only true if the sibling runs at the same time.
        return "together" if both_inside.wait(timeout=10) else "alone"

    j.turn("both")
    results = j.step(
        [{"id": f"w{i}", "name": "wait_for_sibling", "arguments": {}} for i in (1, 2)]
    )
    j.close()
    assert [r["call_id"] for r in results] == ["w1", "w2"]
    assert [r["content"] for r in results] == ["together", "together"]


def test_step_takes_each_providers_raw_response(paths):
    journal, ws = paths
    j = tooljournal.Journal.create(journal, workspace=ws)
    got = []

    @j.tool("append_note", schema=NOTE_SCHEMA)
    def append_note(args, ctx):
        got.append((ctx.call_id, args["text"]))
        return "ok"

    responses = [
        {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0,
            "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
            "tool_calls": [{"id": "oa1", "type": "function",
            "function": {"name": "append_note", "arguments": "{\"text\": \"chat\"}"}}]}}]},
        {"id": "resp_1", "object": "response", "status": "completed", "output": [
            {"type": "function_call", "id": "fc_1", "call_id": "or1", "name": "append_note",
             "arguments": "{\"text\": \"responses\"}"}]},
        {"id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "tool_use",
         "content": [{"type": "tool_use", "id": "an1", "name": "append_note",
                      "input": {"text": "anthropic"}}]},
        {"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "append_note", "args": {"text": "gemini"}}}]},
            "finishReason": "STOP"}]},
    ]
    j.turn("note four ways")
    for response in responses:
        (result,) = j.step(response)
        assert result["ok"], result
    (final,) = [j.step({"id": "msg_2", "type": "message", "role": "assistant",
                        "stop_reason": "end_turn",
                        "content": [{"type": "text", "text": "All noted."}]})]
    assert final == []
    assert [t for _, t in got] == ["chat", "responses", "anthropic", "gemini"]
    assert [c for c, _ in got][:3] == ["oa1", "or1", "an1"]
    body = j.history("anthropic")
    j.close()
    last = body["messages"][-1]
    assert last["role"] == "assistant"
    assert last["content"] == [{"type": "text", "text": "All noted."}]


def test_history_gives_each_format_a_whole_body_paired_with_results(paths):
    journal, ws = paths
    j = tooljournal.Journal.create(journal, workspace=ws)

    @j.tool("append_note", schema=NOTE_SCHEMA, description="Appends a note.")
    def append_note(args, ctx):
        return "noted"

    j.turn("note it")
    j.step(note_calls("x"))
    chat = j.history("openai-chat")
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "tool"]
    assert chat["messages"][2]["tool_call_id"] == "c1"
    assert chat["tools"][0]["function"]["name"] == "append_note"
    responses = j.history("openai-responses")
    assert [i.get("type") for i in responses["input"]][-2:] == [
        "function_call",
        "function_call_output",
    ]
    gemini = j.history("gemini")
    assert "functionResponse" in gemini["contents"][-1]["parts"][0]
    with pytest.raises(tooljournal.UsageError, match="not one of"):
        j.history("cohere")
    j.close()
    # The package's rebuild and the binary's agree byte for byte, once parsed.
    for fmt in tooljournal.FORMATS:
        ours = tooljournal.rebuild(journal, fmt)
        theirs = json.loads(run([binary("recover"), "rebuild", "--dry-run", "--format", fmt,
                                 str(journal)]).stdout)
        assert ours == theirs, fmt


def test_misuse_is_a_usage_error_naming_what_was_wrong(paths):
    journal, ws = paths
    j = tooljournal.Journal.create(journal, workspace=ws)
    with pytest.raises(tooljournal.UsageError, match="no turn is open"):
        j.step([])
    with pytest.raises(tooljournal.UsageError, match=r"response: .*not a response of"):
        j.turn("t")
        j.step({"hello": "world"})
    with pytest.raises(tooljournal.UsageError, match="before the first turn"):
        j.add_tool(tooljournal.tool("late")(lambda a, c: "x"))
    with pytest.raises(ValueError, match=r"calls\[0\].name: missing"):
        j.step([{"id": "a"}])
    j.close()
    with pytest.raises(tooljournal.UsageError, match="closed"):
        j.turn("after close")
    with pytest.raises(tooljournal.UsageError, match="not a directory"):
        tooljournal.Journal.create(journal.parent / "j2", workspace=journal.parent / "missing")
    assert tooljournal.UsageError.code == 1 and tooljournal.Corrupt.code == 2
    assert tooljournal.NewerSchema.code == 3
    assert issubclass(tooljournal.JournalLocked, tooljournal.Error)


def test_a_corrupt_journal_raises_corrupt_with_the_clis_message_and_exit_code(paths):
    journal, ws = paths
    with tooljournal.Journal.create(journal, workspace=ws) as j:
        j.tool("t")(lambda a, c: "x")
        j.turn("one")
        j.step([{"id": "a", "name": "t", "arguments": {}}])
        j.turn("two")
        j.step([{"id": "b", "name": "t", "arguments": {}}])
    (segment,) = [p for p in journal.iterdir() if p.suffix == ".segment"]
    data = bytearray(segment.read_bytes())
    data[len(data) // 3] ^= 0xFF
    segment.write_bytes(bytes(data))
    with pytest.raises(tooljournal.Corrupt) as caught:
        tooljournal.classify(journal)
    cli = run([binary("recover"), "classify", "--dry-run", str(journal)], check=False)
    assert cli.returncode == caught.value.code == 2
    assert str(caught.value) in cli.stderr


HOLDER = """
import sys, tooljournal
j = tooljournal.Journal.create(sys.argv[1], workspace=sys.argv[2])
open(sys.argv[3], "w").close()
sys.stdin.read()
j.close()
"""


def test_a_second_process_on_the_journal_is_refused_while_the_first_holds_it(paths, tmp_path):
    journal, ws = paths
    ready = tmp_path / "ready"
    child = start_child(HOLDER, str(journal), str(ws), str(ready))
    try:
        wait_for(ready, child)
        with pytest.raises(tooljournal.JournalLocked, match=f"pid {child.pid}") as caught:
            tooljournal.Journal.create(journal, workspace=ws)
        assert caught.value.code == 1
        with pytest.raises(tooljournal.JournalLocked):
            tooljournal.Journal.resume(journal)
    finally:
        child.kill()
        child.wait()


def test_async_tools_run_on_the_callers_loop_through_astep(paths):
    journal, ws = paths
    j = tooljournal.Journal.create(journal, workspace=ws)
    loops = []

    @j.tool("sleepy", read_only=True)
    async def sleepy(args, ctx):
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0.05)
        return f"slept {ctx.call_id}"

    @j.tool("plain")
    def plain(args, ctx):
        return "plain"

    async def main():
        j.turn("async")
        results = await j.astep(
            [
                {"id": "s1", "name": "sleepy", "arguments": {}},
                {"id": "s2", "name": "sleepy", "arguments": {}},
                {"id": "p1", "name": "plain", "arguments": {}},
            ]
        )
        return results, asyncio.get_running_loop()

    results, loop = asyncio.run(main())
    assert [r["content"] for r in results] == ["slept s1", "slept s2", "plain"]
    assert loops == [loop, loop]
    # An async tool from the synchronous `step` runs on the journal's own loop.
    j.turn("sync")
    (r,) = j.step([{"id": "s3", "name": "sleepy", "arguments": {}}])
    assert r["content"] == "slept s3"
    j.close()


def test_abort_stops_the_step_running_calls_see_cancelled_queued_ones_never_start(paths):
    journal, ws = paths
    j = tooljournal.Journal.create(journal, workspace=ws)
    started = threading.Event()
    ran = []

    @j.tool("wait_until_cancelled", concurrent=True)
    def wait_until_cancelled(args, ctx):
        ran.append(ctx.call_id)
        started.set()
        deadline = time.monotonic() + 10
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.005)
        return "saw the stop" if ctx.cancelled else "never stopped"

    @j.tool("after")
    def after(args, ctx):
        ran.append(ctx.call_id)
        return "ran"

    threading.Thread(target=lambda: (started.wait(10), j.abort()), daemon=True).start()
    j.turn("stop me")
    results = j.step(
        [
            {"id": "a1", "name": "wait_until_cancelled", "arguments": {}},
            {"id": "a2", "name": "after", "arguments": {}},
        ]
    )
    j.close()
    assert ran == ["a1"]
    # The body saw the stop and said so: its answer is what it returned.
    assert results[0]["ok"] and results[0]["content"] == "saw the stop", results[0]
    assert results[1]["code"] == "ABORTED_BEFORE_DISPATCH"
    steps = tooljournal.audit(journal)
    assert [c["state"] for c in steps["calls"]] == ["committed", "committed"]


INTERRUPTED = """
import os, signal, sys, time, json, tooljournal
# As in a terminal: Python turns SIGINT into KeyboardInterrupt only when it starts with SIGINT
# not ignored, and a background job (CI run with `&`) starts its children with it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
j = tooljournal.Journal.create(sys.argv[1], workspace=sys.argv[2])
@j.tool("wait")
def wait(args, ctx):
    open(sys.argv[3], "w").close()
    time.sleep(30)
    return "slept"
@j.tool("after")
def after(args, ctx):
    return "ran"
j.turn("interrupt me")
try:
    j.step([{"id": "k1", "name": "wait", "arguments": {}},
            {"id": "k2", "name": "after", "arguments": {}}])
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
# The stop ended the turn too, as the CLI's Ctrl-C does: no step without a new turn.
try:
    j.step([])
except tooljournal.UsageError as e:
    print(e, flush=True)
j.close()
"""


def test_ctrl_c_during_a_step_is_the_users_stop_journaled_as_the_cli_journals_it(paths, tmp_path):
    journal, ws = paths
    inside = tmp_path / "inside"
    child = start_child(INTERRUPTED, str(journal), str(ws), str(inside))
    wait_for(inside, child)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert out.splitlines()[0] == "KeyboardInterrupt"
    assert "no turn is open" in out.splitlines()[1], out
    audit = tooljournal.audit(journal)
    codes = {c["call_id"]: c["result_code"] for c in audit["calls"]}
    assert codes == {"k1": "ABORTED", "k2": "ABORTED_BEFORE_DISPATCH"}
    # The journal is balanced as written: nothing for recovery to answer.
    assert all(c["classification"] is None for c in tooljournal.classify(journal))
