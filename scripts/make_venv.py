"""Create or update the project virtualenv for one profile, safely when several `make`s run at once.

Why a script and not two lines of Makefile: the README starts the daemon and the dev model server
side by side (`make dev-model & make run`); on a fresh clone both would create `.venv` at the same
moment and one fails with "File exists". Here every step runs under an exclusive lock on
``<venv>.lock``, and a profile is only (re)installed when the files it is built from changed, so the
second `make` waits for the first and then finds nothing to do.

Profiles:
  runtime  what running the daemon and trying it needs (`make run`, `make dev-model`): the pins of
           requirements.txt, then the daemon (which puts the `toolnexus-daemon` command in
           <venv>/bin) and the Python client, both editable from the checkout and without their
           dependencies (the pins are those already installed). No development tool.
  dev      runtime plus the test and tool chain of requirements-dev.txt (`make test`, `make lint`, ...).

The two packages are installed with pip's build isolation in the runtime profile (pip fetches the
build backend, setuptools, into a throw-away environment: the runtime venv stays without it) and
without it in the dev profile, whose pins include setuptools.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import subprocess
import sys
import venv
from pathlib import Path

PIP = ["-m", "pip", "install", "-q", "--disable-pip-version-check"]
PACKAGES = ["pyproject.toml", "clients/python/pyproject.toml"]
PROFILES: dict[str, list[str]] = {
    "runtime": ["requirements.txt", *PACKAGES],
    "dev": ["requirements.txt", "requirements-dev.txt", *PACKAGES],
}


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    root = Path(args.root).resolve()
    target = (root / args.venv).resolve()
    inputs = [root / name for name in args.requirements or PROFILES[args.profile]]
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{target}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even on a crash
        return _ensure(target, args.profile, inputs, root, args.no_editable)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="dev")
    parser.add_argument("--venv", default=".venv", help="the virtualenv directory (default .venv)")
    parser.add_argument("--root", default=".", help="the repository root (default: the current directory)")
    parser.add_argument("--requirements", nargs="*", help="override the profile's requirement files")
    parser.add_argument("--no-editable", action="store_true",
                        help="skip installing the daemon and client packages (tests)")
    return parser.parse_args(argv)


def _ensure(target: Path, profile: str, inputs: list[Path], root: Path, no_editable: bool) -> int:
    stamp = target / f".installed-{profile}"
    digest = _digest(inputs)
    if stamp.is_file() and stamp.read_text() == digest:
        return 0
    python = target / "bin" / "python"
    if not python.is_file():
        print(f"creating {target.name}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=target.exists()).create(target)
    for req in (p for p in inputs if p.suffix == ".txt"):
        _run([str(python), *PIP, "-r", str(req)])
    if not no_editable:
        isolation = ["--no-build-isolation"] if profile == "dev" else []
        _run([str(python), *PIP, "--no-deps", *isolation, "-e", str(root),
              "-e", str(root / "clients" / "python")])
    stamp.write_text(digest)
    return 0


def _digest(inputs: list[Path]) -> str:
    """What the profile was built from: a changed pin re-runs the install, nothing else does."""
    h = hashlib.sha256()
    for path in inputs:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, check=False)
    if done.returncode != 0:
        sys.exit(f"venv: `{' '.join(cmd)}` failed with exit code {done.returncode}")


if __name__ == "__main__":
    sys.exit(main())
