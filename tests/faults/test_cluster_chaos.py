"""kill -9, SIGSTOP past the lease, database stalls and a restart of the database spread over a
cluster of three daemons while lanes cycle through any of them: nothing acknowledged is lost, no
completed call runs again and no read is stale (the short CI version of ``make chaos-cluster``; the
seed comes from TOOLNEXUS_CHAOS_SEED when set, the faults from TOOLNEXUS_CHAOS_FAULTS, e.g.
``kill,stop``)."""

from __future__ import annotations

import os
import random
from pathlib import Path

from tests.e2e.test_crash_reattach import free_port
from tests.support.pg import PgServer
from tests.support.pg_fixtures import pg_dsn, pg_server

from .cluster import FAULT_KINDS, ClusterChaosConfig, run_cluster_chaos

__all__ = ["pg_dsn", "pg_server"]


def test_faults_across_a_cluster_lose_nothing_and_read_nothing_stale(tmp_path: Path, pg_server: PgServer,
                                                                      pg_dsn: str) -> None:
    seed = int(os.environ.get("TOOLNEXUS_CHAOS_SEED") or random.SystemRandom().randrange(1 << 31))
    kills = int(os.environ.get("TOOLNEXUS_CHAOS_KILLS") or 6)
    kinds = tuple((os.environ.get("TOOLNEXUS_CHAOS_FAULTS") or ",".join(FAULT_KINDS)).split(","))
    # one fault of the five is a restart of the database under the running daemons
    cfg = ClusterChaosConfig(work_dir=tmp_path, dsn=pg_dsn, seed=seed, kills=kills, deadline_s=90,
                             database=pg_server, fault_kinds=kinds)
    report = run_cluster_chaos(cfg, [free_port() for _ in range(cfg.nodes)])
    print("\n" + report.render())
    assert report.kills == kills
    assert report.losses == 0, report.render()
    assert report.cycles > 0 and report.resumes > 0 and report.reads > 0
