"""The metadata service: what a guest learns of itself at 169.254.169.254, as Nova's metadata API.

``stratus metadata`` serves it (``processes/metadata.py``). It reads the read models (the server's
row, its key pair) and the user-data store, never a hypervisor host; the guest is named by a proxy's
signed ``X-Instance-ID`` or, where allowed, by its address (``caller.py``). ``stratus.metadata``
builds Nova's OpenStack and EC2 trees and its two vendordata providers (the config drive's worker
writes the same trees), ``passwords.py`` keeps the password a guest posts once; ``app.py`` answers
HTTP. See docs/metadata.md.
"""
