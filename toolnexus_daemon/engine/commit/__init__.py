"""The one commit path: the committer that groups every runtime's changes into store transactions,
the commit guard (cluster leases), and the landing of a commit while a turn asks the model.
It hears from a runtime only through the ``CommitHost`` protocol it owns: it never imports a turn
or a verb."""
