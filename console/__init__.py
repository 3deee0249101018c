"""The Ragu console: a browser UI for admins and users, served at ``/`` by ``ragu serve``.

It is static HTML, CSS and ES modules that talk only to chonkit's and kappi's public HTTP APIs, plus one
development endpoint that mints a token when no identity provider is configured (see :mod:`console.app`).
"""
