"""A journal in PostgreSQL, through the package: created, stepped, read by the package and
by the `recover` binary, resumed. The server is the test's own (initdb and pg_ctl on a Unix
socket in a temporary directory, once for this file); missing PostgreSQL fails the test."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile

import pytest

import tooljournal
from helpers import binary, recover_json, run


def pg_bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))[-1:]), None)
    if not found:
        raise AssertionError(f"{name} not found: install PostgreSQL's server (apt-get install postgresql)")
    return found


def as_server_user(args: list) -> list:
    """initdb refuses root: run as `postgres` then (Debian's package makes the user)."""
    if os.geteuid() != 0:
        return args
    return ["runuser", "-u", "postgres", "--", *args]


@pytest.fixture(scope="module")
def server():
    base = tempfile.mkdtemp(prefix="tooljournal-py-pg-")
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(base, user.pw_uid, user.pw_gid)
    data = os.path.join(base, "data")
    subprocess.run(
        as_server_user([pg_bin("initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"]),
        check=True, capture_output=True,
    )
    options = f"-c listen_addresses='' -k {base} -c fsync=off"
    subprocess.run(
        as_server_user([pg_bin("pg_ctl"), "-D", data, "-l", os.path.join(base, "log"), "-w", "-t", "60", "-o", options, "start"]),
        check=True, capture_output=True,
    )
    try:
        run([binary("tooljournal"), "store", "init", f"postgres://postgres@/postgres?host={base}"])
        yield base
    finally:
        subprocess.run(as_server_user([pg_bin("pg_ctl"), "-D", data, "-m", "immediate", "stop"]), capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_a_postgres_journal_is_written_read_and_resumed_through_the_package(server, tmp_path):
    url = f"postgres://postgres@/postgres?host={server}&session=py-1"
    ws = tmp_path / "ws"
    ws.mkdir()

    @tooljournal.tool("append_note")
    def append_note(args, ctx):
        return "noted " + args["text"]

    j = tooljournal.Journal.create(url, workspace=ws, tools=[append_note])
    j.turn("note it")
    results = j.step([{"id": "p1", "name": "append_note", "arguments": {"text": "in pg"}}])
    assert results[0]["content"] == "noted in pg"
    assert "py-1" in j.location
    # Held: a second writer is refused while this one holds the lease.
    with pytest.raises(tooljournal.JournalLocked):
        tooljournal.Journal.create(url, workspace=ws)
    body = j.history("anthropic")
    assert body["messages"][-1]["content"][0]["tool_use_id"] == "p1"
    j.close()

    calls = tooljournal.classify(url)
    assert [(c["call_id"], c["state"]) for c in calls] == [("p1", "committed")]
    assert recover_json("classify", url)["calls"] == calls

    again = tooljournal.Journal.resume(url, tools=[append_note])
    again.turn("more")
    again.step([{"id": "p2", "name": "append_note", "arguments": {"text": "again"}}])
    again.close()
    assert [c["call_id"] for c in tooljournal.classify(url)] == ["p1", "p2"]
