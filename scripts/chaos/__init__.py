"""`make chaos`: signed load, PostgreSQL restarts and SIGKILLs, then a check of the invariants.

One module per concern:

- ``plan``       what a run does (durations, rates, the fault schedule), from the command line
- ``cluster``    a PostgreSQL cluster of our own on a free port, faulted on request, always dropped
- ``processes``  ``hookinbox serve`` / ``worker`` and the sink, started, SIGKILLed, restarted
- ``signing``    Standard Webhooks v1 signatures (the load signs, the sink re-checks)
- ``sink``       the counting forward target (its own process)
- ``load``       clients that retry like a provider until a 2xx
- ``faults``     the schedule of faults and how long hookinbox took to recover from each
- ``journal``    what hookinbox stored, read with SQL from its own tables
- ``report``     the invariants and the printed figures
- ``run``        the whole run, with clean-up in every case

Only the command line and SQL touch hookinbox: nothing here imports it.
"""
