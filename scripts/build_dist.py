"""`make dist`: build what can be installed outside this checkout into one directory.

* ``toolnexus_daemon-<version>-py3-none-any.whl`` — the daemon and its ``toolnexus-daemon`` command
  (the scripted dev model is not in it: it stays in the checkout);
* ``toolnexus_client-<version>-py3-none-any.whl`` — the Python client with its generated stubs;
* ``toolnexus-client-<version>.tgz`` — the Node client, made by ``npm pack`` (its ``prepack`` script
  copies ``proto/`` in; the client is plain JavaScript, nothing is compiled).

Install them with ``pip install dist/toolnexus_daemon-*.whl dist/toolnexus_client-*.whl`` (the daemon's
commands for people use the Python client: its wheel declares ``toolnexus-client`` of the same version) /
``pip install dist/toolnexus_client-*.whl``
and ``npm install /path/to/dist/toolnexus-client-*.tgz``; their dependencies come from the usual
registries. The wheels and the tarball are built from a copy of the sources in a temporary
directory, so the checkout gets no ``build/``, ``*.egg-info`` or ``clients/node/proto`` of its own;
the build backend (setuptools) is the one of the dev profile's pins, so nothing is fetched.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "dist", "*.egg-info", "node_modules")
# what each wheel is built from: (name of the copy, files and directories relative to ROOT)
WHEELS: list[tuple[str, list[str]]] = [
    ("daemon", ["pyproject.toml", "LICENSE", "README.md", "toolnexus_daemon"]),
    ("client", ["clients/python/pyproject.toml", "clients/python/README.md", "LICENSE",
                "clients/python/toolnexus_client"]),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="dist", help="the directory the files are written to (default dist)")
    parser.add_argument("--no-node", action="store_true", help="build the two wheels only")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    built = [_wheel(name, parts, out) for name, parts in WHEELS]
    if not args.no_node:
        built.append(_node_tarball(out))
    for path in built:
        print(path)
    return 0


def _wheel(name: str, parts: list[str], out: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix=f"toolnexus-dist-{name}-") as tmp:
        for part in parts:
            source, target = ROOT / part, Path(tmp) / Path(part).name
            if source.is_dir():
                shutil.copytree(source, target, ignore=SKIP)
            else:
                shutil.copy2(source, target)
        listing = _run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check",
                        "--no-deps", "--no-build-isolation", "--wheel-dir", tmp + "/wheel", tmp])
        wheels = sorted(Path(tmp, "wheel").glob("*.whl"))
        if len(wheels) != 1:
            sys.exit(f"dist: building the {name} wheel gave {[w.name for w in wheels]}\n{listing}")
        return Path(shutil.copy2(wheels[0], out / wheels[0].name))


def _node_tarball(out: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("dist: npm is not on the PATH (Node.js 20 or newer brings it); "
                 "`python scripts/build_dist.py --no-node` builds the wheels alone")
    # packed from a copy laid out as the checkout is (the prepack script copies ../../proto into
    # the package): the checkout's clients/node never holds a half-copied proto/ a test could load
    with tempfile.TemporaryDirectory(prefix="toolnexus-dist-node-") as tmp:
        package = Path(tmp) / "clients" / "node"
        shutil.copytree(ROOT / "clients" / "node", package, ignore=SKIP)
        shutil.copytree(ROOT / "proto", Path(tmp) / "proto", ignore=SKIP)
        # --json: the file name npm chose, without parsing its human output
        printed = _run([npm, "pack", "--json", "--pack-destination", str(out)], cwd=package)
    return out / _tarball_name(printed)


def _tarball_name(printed: str) -> str:
    start = printed.find("[")  # the prepack script's own output comes first
    return str(json.loads(printed[start:])[0]["filename"])


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"dist: `{' '.join(cmd)}` failed with exit code {done.returncode}\n"
                 f"{done.stdout}{done.stderr}")
    return done.stdout


if __name__ == "__main__":
    sys.exit(main())
