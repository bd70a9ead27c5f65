"""What the package's tests share: the repository's binaries (built by cargo; a test fails,
never skips, when one is missing) and a child Python process to crash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def binary(name: str) -> str:
    """A binary of the workspace: `TOOLJOURNAL_BIN_DIR` (where .ci/run built them), else
    target/debug. Missing is a failure naming the build command."""
    directory = Path(os.environ.get("TOOLJOURNAL_BIN_DIR", REPO / "target" / "debug"))
    path = directory / name
    if not path.is_file():
        raise AssertionError(
            f"{path} not found: build it with `cargo build --bin {name}` in {REPO} "
            "(or set TOOLJOURNAL_BIN_DIR)"
        )
    return str(path)


def run(args: list, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"{args} exited {done.returncode}: {done.stderr}")
    return done


def recover_json(command: str, journal: str, *extra: str):
    """`recover COMMAND --json --dry-run JOURNAL ...`, parsed."""
    done = run([binary("recover"), command, "--json", "--dry-run", journal, *extra])
    return json.loads(done.stdout)


def start_child(source: str, *args: str) -> subprocess.Popen:
    """A Python child running `source` with `args` (sys.argv[1:])."""
    return subprocess.Popen(
        [sys.executable, "-c", source, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, child: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Until `path` exists; a child that dies first fails the test with its stderr."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if child.poll() is not None:
            raise AssertionError(f"the child exited {child.returncode}: {child.stderr.read()}")
        if time.monotonic() > deadline:
            child.kill()
            raise AssertionError(f"{path} did not appear in {timeout_s} s")
        time.sleep(0.01)
