"""api/ speaks HTTP: OpenStack Compute's API (Nova-shaped JSON) in Falcon, served by gunicorn.

Writes become commands sent to the process's message bus (``commands.bus``), which ``api.app``'s
``create_app`` hands every resource; reads are SQL over the read models (``projections.queries``).
``api.app`` is the composition root; one module per resource.
"""
