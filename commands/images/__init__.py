"""Commands on images (Glance's images API and Nova's image proxy): creating them, recording their
data's upload, changing and sharing them, and Glance's tasks. Image data never passes through here:
the API stores it (``stratus.imagestore``) and records the upload with its size and digests."""
