"""The code blocks of the README and the docs work as written: the runnable ones are run, the rest are
checked against the daemon's own argument parsers and the Makefile.

The convention, for the fenced blocks of the files in ``DOCS``:

* ```` ```sh run ````, ```` ```python run ```` and ```` ```js run ```` (the word ``run`` after the
  language) — run by this test, in document order, against a daemon of its own started with the
  command ``make run`` runs (read from ``make -n run``), with the scripted model of
  ``make dev-model`` beside it. The daemon also serves answer links (``--answers-listen``), as
  the README's loopback recipe starts it.
  A ``sh`` block runs in bash with ``set -euo pipefail`` from the repository root (so
  ``.venv/bin/grpcurl`` is the real grpcurl of the dev toolchain); a ``python`` block runs on this
  interpreter (the venv's python, with the client) from a temporary directory; a ``js`` block runs
  as an ES module on ``node`` with ``toolnexus-client`` resolving to clients/node (skipped until
  ``npm ci`` there, which ``make test`` runs first). Each block must exit 0.
* The blocks use the addresses a user has: the test maps them to its own ports, and the docs say so
  beside the blocks. ``ADDRESSES`` lists them: the daemon ``127.0.0.1:50051``, the dev model
  ``127.0.0.1:8099``, the answer links ``127.0.0.1:8088``.
* What a run block shows as output must be what it printed: in a ``sh run`` block, every
  ``"key": value`` pair (a string, a number, ``true``/``false`` or a list of strings) on a comment line
  must be in its output (whitespace aside); in a ``python run`` (``js run``) block, the comment
  after a ``print(...)`` (``console.log(...)``) must be in its output.
* Every other ``sh``/``bash``/``shell`` block is checked: each command that starts the daemon's
  command (``toolnexus-daemon``, ``.venv/bin/toolnexus-daemon``, ``python -m toolnexus_daemon``) is
  parsed by that command's own parser, so a renamed or removed flag fails here; ``make TARGET``
  must name a target of the Makefile; ``pip install dist/...`` a file ``make dist`` builds;
  the relative paths of ``cd``/``node``/``python``/``npm install``/``pip install`` must exist.
  Blocks that cannot run in a test (``make run`` blocks forever, a production ``serve``) stay in
  this group.
* Every other ``python`` block must compile (fragments, such as a ``llm = {...}``, are fine).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

import pytest

from tests.ops.test_dist import DIST_FILES
from toolnexus_daemon import cli, config
from toolnexus_daemon.api.health_probe import probe_parser
from toolnexus_daemon.people import commands as people

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "clients" / "python" / "README.md",
        ROOT / "clients" / "node" / "README.md", ROOT / "examples" / "README.md"]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.M | re.S)
SHELLS = {"sh", "bash", "shell"}
# the addresses the docs use, and what each stands for in the test
ADDRESSES = {"daemon": "127.0.0.1:50051", "model": "127.0.0.1:8099", "answers": "127.0.0.1:8088"}
DAEMON_COMMANDS = ("toolnexus-daemon", ".venv/bin/toolnexus-daemon")
PAIR = re.compile(r'"\w+": ("[^"]*"|-?\d+|true|false|\[[^\]]*\])')
BLOCK_TIMEOUT_S = 60


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    lang: str
    mode: str  # "run" or "" (checked)
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    text = doc.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        words = m.group(1).split()
        lang, mode = (words[0] if words else ""), ("run" if "run" in words[1:] else "")
        found.append(Block(doc, text.count("\n", 0, m.start()) + 1, lang, mode, m.group(2)))
    return found


ALL = [b for doc in DOCS for b in blocks(doc)]
RUN = [b for b in ALL if b.mode == "run"]
CHECKED_SH = [b for b in ALL if b.lang in SHELLS and b.mode != "run"]
CHECKED_PY = [b for b in ALL if b.lang == "python" and b.mode != "run"]


def test_the_convention_is_in_use() -> None:
    """The runnable blocks the README promises are marked, so a lost marker cannot empty this test."""
    readme = [b for b in RUN if b.doc.name == "README.md" and b.doc.parent == ROOT]
    assert {b.lang for b in readme} == {"sh", "python", "js"}, [b.where for b in readme]
    assert any(b.doc.parent.name == "python" for b in RUN)
    assert [b.where for b in RUN if b.lang not in SHELLS | {"python", "js"}] == []
    assert [b for b in RUN if b.lang == "js"], "the README's Node quickstart is run too"


# --- the checked blocks -------------------------------------------------------------------------

def commands(script: str) -> Iterator[list[str]]:
    """The simple commands of a shell block: continuations joined, comments dropped, split at
    ``;``, ``&&``, ``||``, ``|`` and ``&``; variable assignments and lines it cannot split skipped."""
    joined = re.sub(r"\\\n", " ", script)
    for line in joined.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        command: list[str] = []
        for word in [*words, ";"]:
            ends = word in {";", "&&", "||", "|", "&"} or word.endswith(";")
            word = "" if word in {";", "&&", "||", "|", "&"} else word.removesuffix(";")
            if word and (command or not re.fullmatch(r"\w+=.*", word)):
                command.append(word)
            if ends and command:
                yield command
            if ends:
                command = []


def _parse(parser_of: object, argv: list[str]) -> str | None:
    """None if ``argv`` parses (``--help`` included), else argparse's message."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser_of.parse_args(argv)  # type: ignore[attr-defined]
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                return err.getvalue().strip().splitlines()[-1]
    return None


def check_daemon_command(argv: list[str]) -> str | None:
    """Parse ``toolnexus-daemon SUBCOMMAND ...`` with the parser the daemon itself uses."""
    sub, rest = (argv[0], argv[1:]) if argv else ("", [])
    if sub == "serve":
        return _parse(config.serve_parser({}), rest)
    if sub == "health":
        return _parse(probe_parser({}), rest)
    if sub in people.COMMANDS:
        return _parse(people.parser(sub, {}), rest)
    if sub == "dev-model":
        return None if rest in ([], ["--help"]) or rest[0] == "--listen" and len(rest) == 2 else \
            f"dev-model takes only --listen HOST:PORT, not {rest}"
    if sub in ("--help", "-h", "help", "--version", "-V", "version"):
        return None
    # a command with no parser known here: it must at least exist (its --help exits 0)
    return None if _help_exit_code(sub) == 0 else f"no command {sub!r}"


def _help_exit_code(sub: str) -> int | str | None:
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            return cli.main([sub, "--help"])
        except SystemExit as exit_:
            return exit_.code


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {t for line in re.findall(r"^([\w.\- ]+):(?!=)", text, re.M) for t in line.split()}


def check_command(words: list[str], targets: set[str]) -> str | None:
    head = words[0]
    if head in DAEMON_COMMANDS:
        return check_daemon_command(words[1:])
    if re.fullmatch(r"(\S*/)?python3?", head) and words[1:3] == ["-m", "toolnexus_daemon"]:
        return check_daemon_command(words[3:])
    if head == "make":
        named = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        return next((f"no make target {t!r}" for t in named if t not in targets), None)
    paths = {"cd": words[1:2], "node": words[1:2],
             "npm": [w for w in words[2:] if w.startswith(".")] if words[1:2] == ["install"] else []}
    if re.fullmatch(r"(\.venv/bin/)?python3?", head) and words[1:2] and words[1].endswith(".py"):
        paths["python"] = words[1:2]
    if re.fullmatch(r"(\S*/)?pip3?", head) and words[1:2] == ["install"]:
        for w in (w for w in words[2:] if w.startswith("dist/")):
            if not any(fnmatch(name, w.removeprefix("dist/")) for name in DIST_FILES):
                return f"make dist builds no {w} (it builds {DIST_FILES})"
        paths["pip"] = [w for w in words[2:] if not w.startswith(("-", "dist/")) and "/" in w]
    # a relative path is one of the checkout's; an absolute one (/path/to/your-app) is the reader's
    missing = [p for p in paths.get(head, [])
               if not p.startswith(("/", "~", "$")) and not (ROOT / p).exists()]
    return f"{head}: no {missing[0]} in the repository" if missing else None


@pytest.mark.parametrize("block", CHECKED_SH, ids=lambda b: b.where)
def test_a_shell_block_uses_flags_and_targets_that_exist(block: Block) -> None:
    targets = make_targets()
    problems = [f"{' '.join(c)}: {p}" for c in commands(block.text)
                for p in [check_command(c, targets)] if p]
    assert problems == [], f"{block.where}: " + "\n".join(problems)


@pytest.mark.parametrize("block", CHECKED_PY, ids=lambda b: b.where)
def test_a_python_fragment_compiles(block: Block) -> None:
    compile(block.text, block.where, "exec")


def test_the_checks_catch_a_renamed_flag() -> None:
    targets = make_targets()
    assert check_command(["toolnexus-daemon", "serve", "--answers-listen", "8088"], targets) is None
    renamed = check_command(["toolnexus-daemon", "serve", "--answer-listen", "1"], targets)
    assert renamed is not None and "unrecognized arguments: --answer-listen" in renamed
    assert check_command(["toolnexus-daemon", "pending", "--kind", "approval"], targets) is None
    assert check_command(["make", "no-such-target"], targets) is not None
    assert check_command(["toolnexus-daemon", "no-such-command"], targets) is not None
    assert check_command(["pip", "install", "dist/toolnexus_daemon-*.whl"], targets) is None
    assert check_command(["/opt/v/bin/pip", "install", "dist/toolnexus_daemon.whl"], targets) is not None
    assert list(commands("G=x; $G -d '{\"a\": 1}' \\\n  host $S/New   # out\nmake run &")) == \
        [["$G", "-d", '{"a": 1}', "host", "$S/New"], ["make", "run"]]


# --- the run blocks ------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _make_command(target: str, **variables: str) -> list[str]:
    """The command ``make TARGET`` runs, as ``make -n`` prints it (the set-up step left out)."""
    settings = [f"{k}={v}" for k, v in variables.items()]
    printed = subprocess.run(["make", "-n", "-C", str(ROOT), target, *settings],
                             capture_output=True, text=True, check=True, timeout=30).stdout
    line = next(ln for ln in printed.splitlines() if "-m toolnexus_daemon" in ln)
    words = shlex.split(line)
    return [sys.executable, *words[words.index("-m"):]]


class Stack:
    """The daemon as `make run` starts it (plus the answers listener) and the dev model."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.model_address = f"127.0.0.1:{_free_port()}"
        self.answers_address = f"127.0.0.1:{_free_port()}"
        model = [w.replace(ADDRESSES["model"], self.model_address) for w in _make_command("dev-model")]
        self.model = subprocess.Popen(model, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # the inspector on a port of its own (make run's default is a fixed one)
        serve = _make_command("run", LISTEN="127.0.0.1:0", DATA_DIR=str(tmp / "data"),
                              UI_LISTEN="127.0.0.1:0")
        assert "--listen" in serve and "--data-dir" in serve, serve
        self.daemon = subprocess.Popen([*serve, "--answers-listen", self.answers_address], cwd=ROOT,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        self.address = self._serving()
        self._reachable(self.model_address)

    def _serving(self) -> str:
        found: list[str] = []
        ready = threading.Event()

        def drain() -> None:
            assert self.daemon.stderr is not None
            for line in self.daemon.stderr:
                self.log.append(line)
                m = re.search(r'"msg": "serving".*?"addresses": \["([^"]+)"', line)
                if m:
                    found.append(m.group(1))
                    ready.set()

        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(30):
            self.stop()
            raise RuntimeError("the daemon did not serve:\n" + "".join(self.log))
        return found[0]

    def _reachable(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.model.poll() is not None:
                    raise
                time.sleep(0.05)

    def mapped(self, text: str) -> str:
        for name, real in (("daemon", self.address), ("model", self.model_address),
                           ("answers", self.answers_address)):
            text = text.replace(ADDRESSES[name], real)
        return text

    def unmapped(self, text: str) -> str:
        for name, real in (("daemon", self.address), ("model", self.model_address),
                           ("answers", self.answers_address)):
            text = text.replace(real, ADDRESSES[name])
        return text

    def stop(self) -> None:
        for proc in (self.daemon, self.model):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Path, Stack]]:
    """One daemon and model per document, started at its first run block: a doc's blocks build on
    each other (the README's session creates runtime "demo"), two docs never meet."""
    started: dict[Path, Stack] = {}

    class PerDoc(dict[Path, Stack]):
        def __missing__(self, doc: Path) -> Stack:
            started[doc] = self[doc] = Stack(tmp_path_factory.mktemp("docs"))
            return started[doc]

    yield PerDoc()
    for stack in started.values():
        stack.stop()


def _node_module(tmp: Path, script: str) -> list[str]:
    """``node block.mjs`` where ``import ... from 'toolnexus-client'`` finds clients/node, as after
    ``npm install /path/to/toolnexus-daemon/clients/node`` (a link, like npm's own for a directory)."""
    client = ROOT / "clients" / "node"
    if not (client / "node_modules").is_dir():
        pytest.skip("the Node client's dependencies are not installed (npm ci in clients/node: "
                    "make test runs it)")
    (tmp / "node_modules").mkdir()
    (tmp / "node_modules" / "toolnexus-client").symlink_to(client, target_is_directory=True)
    (tmp / "block.mjs").write_text(script)
    return ["node", "block.mjs"]


def expected_output(block: Block) -> list[str]:
    """What the block says it prints (see the module docstring), whitespace removed."""
    if block.lang in ("python", "js"):
        call, comment = ("print", "#") if block.lang == "python" else (r"console\.log", "//")
        return [re.sub(r"\s+", "", m.group(1).strip().strip("\"'"))
                for m in re.finditer(rf"^.*{call}\(.*\);?\s*{comment}\s*(.+)$", block.text, re.M)]
    comments = [line.split("#", 1)[1] for line in block.text.splitlines() if line.lstrip().startswith("#")]
    return [re.sub(r"\s+", "", m.group(0)) for c in comments for m in PAIR.finditer(c)]


@pytest.mark.parametrize("block", RUN, ids=lambda b: b.where)
def test_a_runnable_block_runs_as_written(block: Block, stacks: dict[Path, Stack], tmp_path: Path) -> None:
    stack = stacks[block.doc]
    script = stack.mapped(block.text)
    if block.lang == "python":
        (tmp_path / "block.py").write_text(script)
        cmd, cwd = [sys.executable, "block.py"], tmp_path
    elif block.lang == "js":
        cmd, cwd = _node_module(tmp_path, script), tmp_path
    else:
        if re.search(r"^\s*curl ", script, re.M) and shutil.which("curl") is None:
            pytest.skip(f"{block.where} uses curl, which is not installed")
        cmd, cwd = ["bash", "-c", "set -euo pipefail\n" + script], ROOT
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S, check=False)
    out = stack.unmapped(done.stdout)
    assert done.returncode == 0, f"{block.where} exited {done.returncode}\n{out}\n{done.stderr}"
    printed = re.sub(r"\s+", "", out)
    assert [e for e in expected_output(block) if e not in printed] == [], f"{block.where} printed:\n{out}"


# --- words a reader of the repository cannot follow -----------------------------------------------

UNSEEN = re.compile(r"\b[Ii]ssues? #?\d+|#\d+\b|\b[Tt]he house\b|\bthe \w+ room\b|\b[Rr]ooms\b")


def test_the_docs_name_nothing_a_reader_cannot_see() -> None:
    """Numbered issues and the team's own metaphors mean nothing to someone with only this repository."""
    docs = [*DOCS, ROOT / "bench" / "README.md"]
    found = [f"{d.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for d in docs for text in [d.read_text(encoding="utf-8")] for m in UNSEEN.finditer(text)]
    assert found == []
