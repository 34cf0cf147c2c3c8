"""Many daemons on one PostgreSQL database as one service: leases, renewal, the sweeper.

``membership`` keeps this daemon's runtime leases (``store.postgres.lease``) and tells the engine
when one is lost or when a runtime has no live owner; ``engine.ownership`` is the engine's
side of it; ``api.forward`` sends a call for a runtime owned elsewhere to its owner.
"""
