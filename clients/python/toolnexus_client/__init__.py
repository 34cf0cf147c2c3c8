"""toolnexus_client: the Python client of toolnexus-daemon."""
