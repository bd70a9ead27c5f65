"""A Python agent SIGKILLed while a tool runs: what the package and the `recover` binary say
of its calls, and what `Journal.resume` runs again. Journals also cross the other way: the
CLI's are read by the package as the binary reads them."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import struct

import tooljournal
from helpers import binary, recover_json, run, start_child, wait_for

AGENT = """
import json, sys, time, tooljournal
journal, ws, log = sys.argv[1], sys.argv[2], sys.argv[3]
j = tooljournal.Journal.create(journal, workspace=ws)

@j.tool("slow_write")
def slow_write(args, ctx):
    with open(log, "a") as f:
        f.write(json.dumps(["slow_write", ctx.call_id, ctx.idempotency_key]) + "\\n")
    time.sleep(60)
    return "written"

@j.tool("append_note")
def append_note(args, ctx):
    with open(log, "a") as f:
        f.write(json.dumps(["append_note", ctx.call_id, ctx.idempotency_key]) + "\\n")
    return "noted " + args["text"]

j.turn("write, then note twice")
j.step([{"id": "done1", "name": "append_note", "arguments": {"text": "before"}}])
j.step([
    {"id": "k1", "name": "slow_write", "arguments": {}},
    {"id": "k2", "name": "append_note", "arguments": {"text": "a"}},
    {"id": "k3", "name": "append_note", "arguments": {"text": "b"}},
])
"""


def tools_for_resume(log):
    @tooljournal.tool("slow_write")
    def slow_write(args, ctx):
        raise AssertionError("a call of unknown outcome must never run again")

    @tooljournal.tool("append_note")
    def append_note(args, ctx):
        with open(log, "a") as f:
            f.write(json.dumps(["append_note", ctx.call_id, ctx.idempotency_key]) + "\n")
        return "noted " + args["text"]

    return [slow_write, append_note]


def documented_key(session_id: str, turn: int, step: int, call_id: str) -> str:
    """docs/FORMAT.md, *Idempotency keys*: `tj1-` and the sha256 of the session id, the turn,
    the step and the call id, each preceded by its little-endian u64 length (or value)."""
    h = hashlib.sha256()
    for part in (session_id.encode(), turn, step, call_id.encode()):
        if isinstance(part, int):
            h.update(struct.pack("<Q", part))
        else:
            h.update(struct.pack("<Q", len(part)))
            h.update(part)
    return "tj1-" + h.hexdigest()


def log_lines(log):
    return [json.loads(line) for line in log.read_text().splitlines()]


def crash(tmp_path):
    journal, ws, log = tmp_path / "journal", tmp_path / "ws", tmp_path / "calls.log"
    ws.mkdir()
    child = start_child(AGENT, str(journal), str(ws), str(log))
    # The slow call is inside its body once it logged itself.
    wait_for(log, child)
    while len(log.read_text().splitlines()) < 2:
        wait_for(log, child)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    return journal, ws, log


def test_a_sigkilled_agent_is_classified_truthfully_and_the_binary_agrees(tmp_path):
    journal, ws, log = crash(tmp_path)
    assert [line[1] for line in log_lines(log)] == ["done1", "k1"]

    calls = {c["call_id"]: c for c in tooljournal.classify(journal)}
    assert calls["done1"]["classification"] is None
    assert calls["done1"]["state"] == "committed"
    assert calls["k1"]["classification"] == "TOOL_OUTCOME_UNKNOWN"
    assert calls["k1"]["state"] == "started"
    assert calls["k2"]["classification"] == "TOOL_NOT_STARTED"
    assert calls["k3"]["classification"] == "TOOL_NOT_STARTED"

    theirs = {c["call_id"]: c for c in recover_json("classify", str(journal))["calls"]}
    assert {k: (c["state"], c["classification"]) for k, c in theirs.items()} == {
        k: (c["state"], c["classification"]) for k, c in calls.items()
    }
    # Reading changed nothing: the binary's own read-only verify sees the same torn-or-clean end.
    run([binary("recover"), "verify", str(journal)])

    # Every format's rebuilt body answers the unknown call with the truth, the others as not
    # started, and the binary gives the same body.
    for fmt in tooljournal.FORMATS:
        body = tooljournal.rebuild(journal, fmt)
        text = json.dumps(body)
        assert "TOOL_OUTCOME_UNKNOWN" in text and "TOOL_NOT_STARTED" in text, fmt
        theirs = json.loads(
            run([binary("recover"), "rebuild", "--dry-run", "--format", fmt, str(journal)]).stdout
        )
        assert body == theirs, fmt


def test_resume_runs_the_not_started_calls_once_with_their_ids_and_keys(tmp_path):
    journal, ws, log = crash(tmp_path)
    j = tooljournal.Journal.resume(journal, tools=tools_for_resume(log))
    # The keys docs/FORMAT.md derives for them (turn 1, step 2), never journaled before.
    keys = {c: documented_key(j.session_id, 1, 2, c) for c in ("k2", "k3")}
    assert [(r["call_id"], r["ok"], r["content"]) for r in j.rerun_results] == [
        ("k2", True, "noted a"),
        ("k3", True, "noted b"),
    ]
    reran = log_lines(log)[2:]
    assert [(name, call_id) for name, call_id, _ in reran] == [
        ("append_note", "k2"),
        ("append_note", "k3"),
    ]
    assert [key for _, _, key in reran] == [keys["k2"], keys["k3"]]

    # The session goes on with new turns, and a second resume runs nothing again.
    j.turn("one more")
    (r,) = j.step([{"id": "k4", "name": "append_note", "arguments": {"text": "c"}}])
    assert r["ok"]
    j.close()
    again = tooljournal.Journal.resume(journal, tools=tools_for_resume(log))
    assert again.rerun_results == []
    again.close()
    assert [c for _, c, _ in log_lines(log)] == ["done1", "k1", "k2", "k3", "k4"]

    calls = {c["call_id"]: c for c in tooljournal.classify(journal)}
    assert calls["k1"]["classification"] == "TOOL_OUTCOME_UNKNOWN"
    assert all(calls[k]["state"] == "committed" for k in ("k2", "k3", "k4"))
    theirs = {c["call_id"]: c["classification"] for c in recover_json("classify", str(journal))["calls"]}
    assert theirs == {k: c["classification"] for k, c in calls.items()}


def test_resume_without_a_rerun_runs_nothing_and_answers_every_call(tmp_path):
    journal, ws, log = crash(tmp_path)
    j = tooljournal.Journal.resume(journal, tools=tools_for_resume(log), rerun=None)
    assert j.rerun_results == []
    body = j.history("openai-chat")
    j.close()
    tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["done1", "k1", "k2", "k3"]
    assert len(log_lines(log)) == 2


def test_journals_the_cli_wrote_read_the_same_through_the_package(tmp_path):
    demo = run([binary("tooljournal"), "demo"])
    journal = re.search(r"^journal: (.+)$", demo.stdout, re.M).group(1)
    crashed = os.path.join(os.path.dirname(journal), "crashed-journal")
    assert os.path.isdir(crashed), demo.stdout
    for path in (journal, crashed):
        ours = tooljournal.classify(path)
        theirs = recover_json("classify", path)["calls"]
        assert ours == theirs, path
        assert len(ours) >= 10
        for fmt in tooljournal.FORMATS:
            body = tooljournal.rebuild(path, fmt)
            cli = run([binary("recover"), "rebuild", "--dry-run", "--format", fmt, path]).stdout
            assert body == json.loads(cli), (path, fmt)
    assert any(c["classification"] for c in tooljournal.classify(crashed))
