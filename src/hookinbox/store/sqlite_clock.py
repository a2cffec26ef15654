"""SQLite's clock for every SQLite module: unix seconds, millisecond precision.

Times are REAL unix seconds taken from SQLite itself (never a worker's clock), so every
process on the host agrees on leases and due times.
"""

NOW = "((julianday('now') - 2440587.5) * 86400.0)"
