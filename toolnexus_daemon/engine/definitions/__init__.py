"""What a runtime is defined by: registry validation, registry versions, the fingerprint of what a
suspended step's answer will be fed to and how a tool's schema drifted, elicitation checks.
Pure functions over definitions: no handle, no store, no clock."""
