"""The LangGraph example (``examples/langgraph_agent.py``) run against tooljournal's loopback
mock provider ``mockllm``, end to end.

The mock serves a script: reply 1 is an openai-chat answer calling ``append_note`` twice,
reply 2 the final text. It checks every request as the provider would (key, ``model``,
``stream: true``, the tools' shape, the history's pairing rules) and prints each one, with the
rule it broke if any. Between the example and the mock runs a small recording proxy, so the test
sees the exact bodies the OpenAI SDK (under ``ChatOpenAI``) sent.

The mock binary is needed: ``$TOOLJOURNAL_MOCKLLM``, else ``<repo>/target/debug/mockllm``. When it
is missing the tests fail (they do not skip), naming the build command.
"""

from __future__ import annotations

import http.client
import http.server
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

import tooljournal

REPO = Path(__file__).resolve().parents[3]  # bindings/python/tests -> ../../..
EXAMPLE = REPO / "bindings" / "python" / "examples" / "langgraph_agent.py"
BUILD = f"cd {REPO} && cargo build -p tooljournal-mockllm"
KEY = "sk-langgraph-test"
MODEL = "gpt-4o-mini"
FINAL = "I wrote both notes: buy milk, call mom."
CALLS = [
    ("call_note_1", "append_note", {"text": "buy milk"}),
    ("call_note_2", "append_note", {"text": "call mom"}),
]
SCRIPT = {
    "expect_key": KEY,
    "replies": [
        {
            "format": "openai-chat",
            "reply": {
                "answer": {
                    "calls": [[i, n, json.dumps(a)] for i, n, a in CALLS],
                    "stop": "tool_use",
                }
            },
        },
        {"format": "openai-chat", "reply": {"answer": {"text": FINAL, "stop": "end_turn"}}},
    ],
}


def mockllm_binary() -> Path:
    """The mock's binary; the calling test fails (not skips) when it is not there."""
    path = Path(os.environ.get("TOOLJOURNAL_MOCKLLM") or REPO / "target" / "debug" / "mockllm")
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"the mockllm binary is missing at {path}: build it with `{BUILD}` "
            "(or point $TOOLJOURNAL_MOCKLLM at one)",
            pytrace=False,
        )
    return path


class Mock:
    """``mockllm --port 0 --script FILE`` as a subprocess, its stdout collected line by line."""

    def __init__(self, binary: Path, script: Path) -> None:
        self.proc = subprocess.Popen(
            [str(binary), "--port", "0", "--script", str(script)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self.lines: List[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        # It prints "openai-chat: base URL http://127.0.0.1:PORT/v1 (2 replies)" once listening.
        self.wait_for(lambda ls: any(l.startswith("openai-chat: base URL ") for l in ls))
        line = next(l for l in self.lines if l.startswith("openai-chat: base URL "))
        self.base_url = line.split("base URL ", 1)[1].split()[0]
        assert line.endswith("(2 replies)"), line

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, done, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not done(list(self.lines)):
            if self.proc.poll() is not None and not self._reader.is_alive():
                pytest.fail(f"mockllm exited ({self.proc.returncode}):\n" + "\n".join(self.lines))
            if time.monotonic() > deadline:
                pytest.fail("mockllm did not print what was awaited:\n" + "\n".join(self.lines))
            time.sleep(0.02)
        return None

    def request_lines(self) -> List[str]:
        """The lines it printed for requests (``FORMAT POST PATH``, ``-> RULE`` when one broke a
        rule)."""
        return [l for l in self.lines if " POST " in l]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class RecordingProxy:
    """Forwards each POST to the mock and records its path and JSON body (the mock's own
    record is not printed with bodies)."""

    def __init__(self, upstream: str) -> None:
        host_port = upstream.split("://", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        self.requests: List[Dict[str, Any]] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                proxy.requests.append({"path": self.path, "body": json.loads(raw)})
                forward = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")
                }
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
                try:
                    conn.request("POST", self.path, body=raw, headers=forward)
                    upstream_response = conn.getresponse()
                    body = upstream_response.read()  # the mock's stream ends: read it whole
                    self.send_response(upstream_response.status)
                    content_type = upstream_response.getheader("content-type", "application/json")
                    self.send_header("content-type", content_type)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                finally:
                    conn.close()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve(tmp_path):
    """Starts the mock (scripted) and the recording proxy in front of it, from inside the test
    (so that a missing binary fails the test rather than erroring its setup); stops them
    after."""
    started: List[Any] = []

    def start():
        binary = mockllm_binary()
        script = tmp_path / "script.json"
        script.write_text(json.dumps(SCRIPT))
        mock = Mock(binary, script)
        started.append(mock)
        proxy = RecordingProxy(mock.base_url)
        started.append(proxy)
        return mock, proxy

    try:
        yield start
    finally:
        for thing in reversed(started):
            thing.stop()


def load_example():
    spec = importlib.util.spec_from_file_location("langgraph_agent", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_run(mock: Mock, proxy: RecordingProxy, journal: Path, workspace: Path) -> None:
    """Everything one run of the example must have left behind."""
    # The mock: two requests, both valid (a broken rule is printed after "->").
    mock.wait_for(lambda ls: len([l for l in ls if " POST " in l]) >= 2)
    log = "\n".join(mock.lines)
    assert mock.request_lines() == ["openai-chat POST /v1/chat/completions"] * 2, log
    assert not any("->" in l for l in mock.request_lines()), log

    # The world: the notes the calls wrote, in the model's order.
    assert (workspace / "notes.txt").read_text() == "buy milk\ncall mom\n"

    # The journal: both calls committed, in one step (one model answer = one step).
    calls = tooljournal.classify(journal)
    assert [(c["call_id"], c["tool"], c["state"], c["classification"]) for c in calls] == [
        (i, n, "committed", None) for i, n, _ in CALLS
    ]
    assert len({(c["turn"], c["step"]) for c in calls}) == 1

    # The requests as the SDK sent them.
    assert [r["path"] for r in proxy.requests] == ["/v1/chat/completions"] * 2
    first, second = (r["body"] for r in proxy.requests)
    for body in (first, second):
        assert body["model"] == MODEL and body["stream"] is True
        declared = {t["function"]["name"]: t["function"]["parameters"] for t in body["tools"]}
        journaled = {
            t["function"]["name"]: t["function"]["parameters"]
            for t in tooljournal.rebuild(journal, "openai-chat")["tools"]
        }
        assert declared == journaled  # the model is shown the schemas the journal has
        assert set(declared) == {"append_note", "list_notes"}
    assert [m["role"] for m in first["messages"]] == ["user"]

    # The second request carries the assistant's calls, then each result paired with its id.
    messages = second["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"], messages
    assistant = messages[1]
    assert [(tc["id"], tc["function"]["name"], json.loads(tc["function"]["arguments"])) for tc in assistant["tool_calls"]] == [
        (i, n, a) for i, n, a in CALLS
    ]
    assert [(m["tool_call_id"], m["content"]) for m in messages[2:]] == [
        ("call_note_1", "noted: buy milk"),
        ("call_note_2", "noted: call mom"),
    ]

    # The journal's own history ends with the final answer, every call answered.
    rebuilt = tooljournal.rebuild(journal, "openai-chat")["messages"]
    assert rebuilt[-1] == {"role": "assistant", "content": FINAL}
    assert [(m["tool_call_id"], m["content"]) for m in rebuilt if m["role"] == "tool"] == [
        ("call_note_1", "noted: buy milk"),
        ("call_note_2", "noted: call mom"),
    ]


def test_example_main_runs_the_graph_against_the_mock(serve, tmp_path):
    mock, proxy = serve()
    journal, workspace = tmp_path / "journal", tmp_path / "ws"
    example = load_example()
    answer = example.main(proxy.base_url, str(journal), str(workspace), model=MODEL, api_key=KEY)
    assert answer == FINAL
    check_run(mock, proxy, journal, workspace)
    # main closed the journal: it can be taken up again at once.
    tooljournal.Journal.resume(journal, rerun=None).close()


def test_example_command_line_prints_the_final_answer(serve, tmp_path):
    mock, proxy = serve()
    journal, workspace = tmp_path / "journal", tmp_path / "ws"
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--base-url", proxy.base_url,
            "--journal", str(journal),
            "--workspace", str(workspace),
            "--model", MODEL,
            "--api-key", KEY,
            "Write two notes: 'buy milk' and 'call mom'.",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == FINAL
    check_run(mock, proxy, journal, workspace)
