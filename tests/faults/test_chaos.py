"""kill -9 the daemon about ten times while handles run, suspend and resume; nothing acknowledged is lost.

The short CI version of ``make chaos`` (same harness, fewer kills). The seed
comes from TOOLNEXUS_CHAOS_SEED when set, so a failing run can be replayed;
it is printed with the figures either way.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from .harness import ChaosConfig, run_chaos


def test_kill9_at_random_moments_loses_nothing(tmp_path: Path) -> None:
    seed = int(os.environ.get("TOOLNEXUS_CHAOS_SEED") or random.SystemRandom().randrange(1 << 31))
    kills = int(os.environ.get("TOOLNEXUS_CHAOS_KILLS") or 10)
    # a short socket path: unix socket paths are limited to about 100 bytes
    min_run = float(os.environ.get("TOOLNEXUS_CHAOS_MIN_RUN_S") or 0)
    keep = bool(os.environ.get("TOOLNEXUS_CHAOS_KEEP"))
    report = run_chaos(ChaosConfig(work_dir=tmp_path, seed=seed, kills=kills, max_delay_s=0.4, deadline_s=50,
                                   min_run_s=min_run, keep_copies=keep))
    print("\n" + report.render())

    assert report.kills == kills
    assert report.losses == 0, report.render()
    assert report.cycles > kills and report.resumes > 0 or not kills
