"""The Ragu console: a browser UI for admins and users, served at ``/`` by ``ragu serve``.

It is static HTML, CSS and ES modules that talk only to chonkit's and kappi's public HTTP APIs, plus the
sign-in endpoints: a development token when no identity provider is configured, or the server half of an
OpenID Connect sign-in (see :mod:`console.app` and :mod:`console.oidc`).
"""
