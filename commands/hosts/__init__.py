"""Commands on compute hosts: registering them, their service status, and host aggregates."""
