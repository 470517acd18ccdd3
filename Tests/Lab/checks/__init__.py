"""The lab tier's checks, one module per area, registered in run order
(run-checks.py imports them in that order)."""
