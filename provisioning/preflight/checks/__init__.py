"""One module per check. Host checks (``stack``) take the versions; rank checks take a ``RankContext``."""
