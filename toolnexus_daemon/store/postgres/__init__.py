"""The store on PostgreSQL: the ``Store`` over one database (``store``), its writer's statements
(``write``), the link to the database (``link``), its schema (``schema``), the pending inbox query
(``pending``) and the runtime leases of a cluster (``lease``, with ``process_id``)."""
