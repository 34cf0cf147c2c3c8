"""The store on LMDB: one environment per data directory (``store``), its writer's operations
(``write``), the indexes kept beside every handle record (``handle_index``, ``pending_index``,
``expiry_index``) and the guards of the data directory (``dirlock``, ``datafile``)."""
