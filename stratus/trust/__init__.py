"""Trust on the log: who may connect to NATS, who may append what, and proof of who appended it.

``nkeys``: Ed25519 keys in NATS's NKey encoding (a part's NATS user key is also its signing key);
``registry``: the identities of a deployment (role, public key, what each may append) and the
position from which every event must be signed; ``natsconf``: the nats-server ``authorization``
block built from them. The signature the recorder puts on every event, and the check the projector
and ``stratus audit verify`` make, are ``stratus.eventstore.signing``. docs/trust.md describes the
model.
"""
