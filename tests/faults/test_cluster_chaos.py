"""kill -9 spread over a cluster of three daemons, and a restart of their database, while lanes
cycle through any of them: nothing acknowledged is lost and no completed call runs again (the
short CI version of ``make chaos-cluster``; the seed comes from TOOLNEXUS_CHAOS_SEED when set)."""

from __future__ import annotations

import os
import random
from pathlib import Path

from tests.e2e.test_crash_reattach import free_port
from tests.support.pg import PgServer
from tests.support.pg_fixtures import pg_dsn, pg_server

from .cluster import ClusterChaosConfig, run_cluster_chaos

__all__ = ["pg_dsn", "pg_server"]


def test_kill9_across_a_cluster_loses_nothing(tmp_path: Path, pg_server: PgServer, pg_dsn: str) -> None:
    seed = int(os.environ.get("TOOLNEXUS_CHAOS_SEED") or random.SystemRandom().randrange(1 << 31))
    kills = int(os.environ.get("TOOLNEXUS_CHAOS_KILLS") or 5)
    # one fault of the five is a restart of the database under the running daemons
    cfg = ClusterChaosConfig(work_dir=tmp_path, dsn=pg_dsn, seed=seed, kills=kills, deadline_s=90,
                             database=pg_server)
    report = run_cluster_chaos(cfg, [free_port() for _ in range(cfg.nodes)])
    print("\n" + report.render())
    assert report.kills == kills
    assert report.losses == 0, report.render()
    assert report.cycles > 0 and report.resumes > 0
