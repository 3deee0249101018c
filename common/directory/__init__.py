"""The directory an identity provider keeps over SCIM, and the rule that makes it decide users' groups.

:mod:`common.directory.membership` is the rule (read by :class:`common.auth.Authenticator` on every request);
:mod:`common.directory.storage` keeps SCIM users and groups in PostgreSQL for scim2-server;
:mod:`common.directory.scim` is the SCIM endpoint kappi mounts. docs/directory.md states the rule.
"""
