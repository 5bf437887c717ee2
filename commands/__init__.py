"""commands/ decides: the aggregates (Flavor, Host, Instance), their events, and the command handlers.

A handler loads the decision state from the log, calls one domain method, and appends the result.
"""
