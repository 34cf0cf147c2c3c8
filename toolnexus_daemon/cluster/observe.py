"""Prometheus figures of a cluster member, read at scrape time.

What moves runtimes between daemons is rare and important, so each movement is counted:
calls forwarded to another daemon, runtimes taken over, commits refused by a lost lease,
and how long the last round of lease renewals took (a renewal slower than a third of the
lease is the warning sign that leases may start to lapse).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .membership import Membership


class ClusterCollector(Collector):
    def __init__(self, membership: Membership, forwarded: Callable[[], int],
                 fenced: Callable[[], int]) -> None:
        self._membership, self._forwarded, self._fenced = membership, forwarded, fenced

    def collect(self) -> Iterator[Metric]:
        m = self._membership
        yield CounterMetricFamily("toolnexus_cluster_forwarded_calls",
                                  "Calls sent on to the daemon that owns their runtime.",
                                  value=self._forwarded())
        yield CounterMetricFamily("toolnexus_cluster_takeovers",
                                  "Runtimes taken over from a daemon that stopped renewing.",
                                  value=m.takeovers)
        yield CounterMetricFamily("toolnexus_cluster_fenced_commits",
                                  "Commits refused because another daemon had taken the runtime over.",
                                  value=self._fenced())
        yield GaugeMetricFamily("toolnexus_cluster_runtimes_owned", "Runtimes this daemon holds a lease on.",
                                value=len(m.held()))
        yield GaugeMetricFamily("toolnexus_cluster_lease_renew_seconds",
                                "Duration of the last round of lease renewals.", value=m.renew_seconds)
