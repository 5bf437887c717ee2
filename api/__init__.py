"""api/ speaks HTTP: OpenStack Compute's API (Nova-shaped JSON) in Falcon, served by gunicorn.

Writes become commands (``commands.handlers``); reads are SQL over the read models
(``projections.queries``). ``api.app`` is the composition root; one module per resource.
"""
