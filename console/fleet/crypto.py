"""Secrets at rest: Fernet for upstream API keys, SHA-256 for node tokens and gateway keys.

Upstream keys must be readable again by the console (it calls the upstream with them), so they
are encrypted; node tokens and gateway keys are only ever compared, so a hash is enough and a
database leak gives nothing usable. Tokens are 32 random bytes, so an unsalted SHA-256 is
safe: there is no dictionary to attack, and the agent's hot path checks a key with one hash.
"""

from __future__ import annotations

import hashlib
import secrets
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

NODE_TOKEN_PREFIX = "tgn_"
GATEWAY_KEY_PREFIX = "tgk_"


class SecretUnreadable(Exception):
    """The ciphertext was made with another Fernet key (TIERGATE_FERNET_KEY changed)."""


@lru_cache(maxsize=4)
def _fernet(key: str) -> Fernet:
    return Fernet(key.encode())


def encrypt(plaintext: str) -> str:
    return _fernet(settings.TIERGATE_FERNET_KEY).encrypt(plaintext.encode()).decode()


def decrypt(ciphertext: str) -> str:
    try:
        return _fernet(settings.TIERGATE_FERNET_KEY).decrypt(ciphertext.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable("the key cannot be decrypted with TIERGATE_FERNET_KEY") from None


def sha256_hex(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def new_node_token() -> str:
    return NODE_TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_gateway_key() -> str:
    return GATEWAY_KEY_PREFIX + secrets.token_urlsafe(32)


def vendor_prefix(secret: str) -> str:
    """The vendor prefix of a key: up to the first '-' or '_' in its first 5 characters
    (`sk-`, `tgk_`), else nothing."""
    for i, ch in enumerate(secret[:5]):
        if ch in "-_":
            return secret[: i + 1]
    return ""


def masked(prefix: str, last4: str) -> str:
    """The one masked form of a key shown anywhere (an endpoint's, a gateway key's):
    `tgk_...95_I`, the vendor prefix and the last four, so one key reads the same on every page."""
    return f"{vendor_prefix(prefix)}...{last4}"


def mask(secret: str) -> str:
    """`sk-...abcd`: the vendor prefix and the last four (`masked`), enough to tell keys
    apart, never enough to use one. Short secrets show less."""
    if not secret:
        return ""
    if len(secret) < 12:
        return "..." + secret[-2:] if len(secret) >= 6 else "***"
    return masked(secret, secret[-4:])
