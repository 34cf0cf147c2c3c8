"""Running and ending a handle's turns: the turn loop and its steps, the model-call slot, budgets,
suspension, escalation, calls of unknown outcome, the built-in task tool, spawning and waking,
interrupt and close, definition drift and upgrades, spans. Every module is a function over the
small role protocol of ``context`` it needs, never over the runtime itself; none launches a turn
(the residency in ``verbs/residency.py`` does, and frees a turn's slot once it ended)."""
