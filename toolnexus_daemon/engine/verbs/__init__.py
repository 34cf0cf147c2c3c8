"""The engine's face: ``Engine`` (every runtime of the daemon) and ``Runtime`` (one runtime, one
method per verb), a runtime's residency in this daemon (load, recovery, eviction), Resume, the
event stream, and running a verb to its end whoever stops listening."""
