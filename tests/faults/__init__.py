"""Fault injection: kill -9 the daemon at random moments and prove nothing acknowledged was lost."""
