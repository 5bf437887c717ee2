"""workers/ act: the scheduler places instances on hosts; the hypervisor worker runs them on libvirt.

They read and append to the event log only; they hold no database access.
"""
