"""When a pending request expires: the one rule (``rule.expired``), the runtime's default ttl,
and the daemon's deadline scheduler that declines due suspensions through the ``Expirable``
protocol it owns."""
