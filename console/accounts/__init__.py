"""Accounts: REST API tokens for automation (named, hashed, shown once, revocable, audited).

Users and their roles are Django's (console.core.roles); this app adds the credentials that
scripts and CI jobs present instead of a browser session.
"""
