"""A runtime's state in memory and the records it commits: handles, their table and cache, step
checkpoints, the request index, result waits, answer-link rows, and ``Change`` — the description
of one state change the commit path writes. Nothing here runs a turn or talks to a model."""
