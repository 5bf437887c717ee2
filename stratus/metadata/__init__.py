"""What a guest learns of itself, as Nova's metadata trees: served over HTTP by ``stratus metadata``
(api/metadata) and written to a config drive by the hypervisor worker (workers/config_drive.py).

The trees are pure: they read a server's data and answer paths, with no request and no database,
so that both can build them from what each may read (the read models; the log).
"""
