"""Generate the Python stubs from proto/ into each package's private _gen.

Why a script: the generated modules import each other as the top-level
``toolnexus.agents.v1`` package, a name that belongs to the reference library.
We rewrite those imports to relative ones so each package owns its own copy
(as temporal's SDK does). ``--check`` regenerates into a temp dir and fails on
any difference, so CI catches stubs that drifted from the contract.

The type stubs (``.pyi``) come from mypy-protobuf's two protoc plugins (pinned in
requirements-dev.txt): ``runtime_pb2.pyi`` types every message and
``runtime_pb2_grpc.pyi`` the service's stubs and servicer, for the blocking and
the asyncio API alike (``grpc`` itself is typed by types-grpcio), so mypy checks
the gRPC edge against the contract instead of seeing ``Any``.
"""

from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
TARGETS = [
    ROOT / "toolnexus_daemon" / "api" / "_gen",
    ROOT / "clients" / "python" / "toolnexus_client" / "_gen",
]
IMPORT_RE = re.compile(r"^from toolnexus\.agents\.v1 import (\w+) as", re.MULTILINE)
HEADER = '"""Generated from proto/ by scripts/gen_proto.py. Do not edit."""\n'


def _plugin(name: str) -> str:
    """The protoc plugin ``name`` beside this interpreter (a venv's bin/), else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found: install requirements-dev.txt (mypy-protobuf)")
    return found


def _protoc(out: Path) -> None:
    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.rglob("*.proto"))
    cmd = [
        sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}",
        f"--plugin=protoc-gen-mypy={_plugin('protoc-gen-mypy')}",
        f"--plugin=protoc-gen-mypy_grpc={_plugin('protoc-gen-mypy_grpc')}",
        f"--python_out={out}", f"--grpc_python_out={out}",
        f"--mypy_out=quiet:{out}", f"--mypy_grpc_out=quiet:{out}", *protos,
    ]
    subprocess.run(cmd, check=True)


def _generate(dest: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _protoc(Path(tmp))
        src = Path(tmp) / "toolnexus" / "agents" / "v1"
        dest.mkdir(parents=True, exist_ok=True)
        for old in dest.glob("*_pb2*"):
            old.unlink()
        for f in sorted(src.iterdir()):
            text = IMPORT_RE.sub(r"from . import \1 as", f.read_text())
            (dest / f.name).write_text(text)
        (dest / "__init__.py").write_text(HEADER)


def _same(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir() if p.is_file() and p.suffix in {".py", ".pyi"})
    other = sorted(p.name for p in b.iterdir() if p.is_file() and p.suffix in {".py", ".pyi"})
    if names != other:
        return False
    return all(filecmp.cmp(a / n, b / n, shallow=False) for n in names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the stubs differ")
    args = parser.parse_args()
    if not args.check:
        for target in TARGETS:
            _generate(target)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "_gen"
        _generate(fresh)
        stale = [str(t.relative_to(ROOT)) for t in TARGETS if not t.exists() or not _same(fresh, t)]
    if stale:
        print("generated stubs differ from proto/; run `make proto`: " + ", ".join(stale))
        return 1
    print("generated stubs match proto/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
