"""Commands on Glance's metadata definitions: namespaces and what is defined in them."""
