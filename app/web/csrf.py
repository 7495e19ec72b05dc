"""CSRF protection for the hosted form page: a signed double-submit token.

The page sets a cookie holding a random nonce and puts a token in a hidden field of the form:
`{issued}.{signature}`, the signature an HMAC-SHA256 over the form id, the nonce and the issue
time. A POST is accepted only if its field's token is signed for this form and for the nonce in
its cookie, and is younger than `TOKEN_MAX_AGE`. Another site can make a browser send the POST
but can neither read the cookie nor sign a token for it; the cookie is `SameSite=Lax` as well.

The key comes from CSRF_SECRET or, unset, is derived from ADMIN_TOKEN (which production
requires), so that every process and replica of one deployment accepts the others' tokens. With
neither set (development only) each process draws a random key: tokens die with the process.
"""

import base64
import hashlib
import hmac
import logging
import re
import secrets
import time
import uuid
from collections.abc import Callable

from app.config import Settings

log = logging.getLogger("intake.web")

#: Seconds a form page's token stays valid: long enough to fill a form in over a day.
TOKEN_MAX_AGE = 24 * 3600
#: Seconds a token may claim to come from the future: clocks of two replicas differ a little.
CLOCK_SKEW = 60
#: The hidden field's name: a hyphen, so that no form field (letters, digits, _) can take it.
FIELD = "csrf-token"
#: The cookie over plain HTTP, and over HTTPS (where `__Host-` pins it to this host, path /).
COOKIE = "intake_csrf"
SECURE_COOKIE = "__Host-intake_csrf"

_NONCE = re.compile(r"^[A-Za-z0-9_-]{32,64}$")
# What the key is derived for: another use of the same secret would use another label.
_LABEL = b"intake hosted form csrf v1"


def signing_key(settings: Settings) -> bytes:
    """The HMAC key: derived from CSRF_SECRET, else ADMIN_TOKEN, else random (development only)."""
    for secret in (settings.csrf_secret, settings.admin_token):
        if secret is not None and secret.get_secret_value():
            return hmac.new(secret.get_secret_value().encode(), _LABEL, hashlib.sha256).digest()
    if settings.environment == "production":  # Settings already refuses this; say why here too
        raise ValueError("ENVIRONMENT=production needs CSRF_SECRET or ADMIN_TOKEN for the form page's tokens")
    log.warning("neither CSRF_SECRET nor ADMIN_TOKEN is set: form page tokens use a random key for this process")
    return secrets.token_bytes(32)


def new_nonce() -> str:
    """A fresh random value for the cookie."""
    return secrets.token_urlsafe(32)


def is_nonce(value: str | None) -> bool:
    """True if `value` looks like a nonce this module made (a cookie is client input)."""
    return bool(value and _NONCE.match(value))


class FormTokens:
    """Issues and checks the hidden-field tokens of the form page."""

    def __init__(self, key: bytes, *, max_age: float = TOKEN_MAX_AGE, clock: Callable[[], float] = time.time):
        self._key = key
        self.max_age = max_age
        self._clock = clock

    def issue(self, form_id: uuid.UUID, nonce: str) -> str:
        """A token for a page of `form_id` shown to the browser holding `nonce`."""
        issued = int(self._clock())
        return f"{issued}.{self._sign(form_id, nonce, issued)}"

    def verify(self, form_id: uuid.UUID, nonce: str | None, token: str | None) -> bool:
        """True if `token` was issued for this form and nonce, and is not too old."""
        if not is_nonce(nonce) or not token or token.count(".") != 1:
            return False
        issued_text, signature = token.split(".")
        if not issued_text.isdigit():
            return False
        age = self._clock() - int(issued_text)
        if not -CLOCK_SKEW <= age <= self.max_age:
            return False
        return hmac.compare_digest(signature, self._sign(form_id, nonce, int(issued_text)))

    def _sign(self, form_id: uuid.UUID, nonce: str, issued: int) -> str:
        message = f"{form_id}:{nonce}:{issued}".encode()
        digest = hmac.new(self._key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def idempotency_key(token: str) -> str:
    """The Idempotency-Key of the submission one page load makes (a double click saves once)."""
    return "page-" + hashlib.sha256(token.encode()).hexdigest()[:40]
