"""The admin web page under ``/admin``, for operators: overview, deliveries with their
trace, dead letters, sources."""
