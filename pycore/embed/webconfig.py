"""The web configuration file of Prometheus's exporter-toolkit (``--web.config.file``), read as
node_exporter reads it, so one file serves a fleet's exporters and pycore alike: TLS with the
server's certificate and client certificates, basic auth with bcrypt hashes, extra response headers
and a request rate limit.  https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md

Where Python's ``ssl`` cannot do what Go's TLS does, the file is refused (one line) rather than
served less safely than it says: ``cipher_suites`` and ``curve_preferences`` (OpenSSL's defaults are
used), and ``RequireAnyClientCert`` without a client CA (OpenSSL verifies every certificate it
requires).  A certificate is checked when the file is read, and the file is read again when it or a
file it names changes (at most once a second), as exporter-toolkit does on each connection.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import os
import re
import socket
import ssl
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

__all__ = ["WebConfig", "WebConfigError", "WebConfigFile", "load"]

_TOP = {"tls_server_config", "http_server_config", "basic_auth_users", "rate_limit"}
_TLS = {"cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type", "client_ca_file",
        "client_allowed_sans", "min_version", "max_version", "cipher_suites", "prefer_server_cipher_suites",
        "curve_preferences"}
_HTTP = {"http2", "headers"}
_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
             "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_AUTH_TYPES = ("NoClientCert", "RequestClientCert", "RequireAnyClientCert", "VerifyClientCertIfGiven",
               "RequireAndVerifyClientCert")
# exporter-toolkit's list: the headers a file may set, and the values it accepts where they are few
_HEADERS: dict[str, tuple[str, ...]] = {
    "Strict-Transport-Security": (), "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"), "X-XSS-Protection": (), "Content-Security-Policy": ()}
_BCRYPT = re.compile(r"\$2[abxy]?\$(\d\d)\$[./A-Za-z0-9]{53}")
# an unknown user is checked against this hash too (of a random password), so that the time of a
# refusal does not tell which users exist (exporter-toolkit does the same)
_DECOY = b"$2b$10$9o3Pg/CzBafucfgB7CslnuqC0tI/2aituWn/KXBNq/oVbsIuYzj/S"
_CACHE_SIZE = 100
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class WebConfigError(Exception):
    """The file cannot be used; the message is one line that names the file and the key."""


@dataclass
class WebConfig:
    """What one reading of the file asks: TLS (``context`` None: plain HTTP), users, headers, rate."""

    path: str
    context: ssl.SSLContext | None = None
    allowed_sans: list[str] | None = None
    users: dict[str, bytes] = field(default_factory=dict)
    headers: list[tuple[str, str]] = field(default_factory=list)
    rate_interval: float = 0.0          # seconds between requests (0: no limit) ...
    rate_burst: int = 0                 # ... with this many at once
    files: tuple[str, ...] = ()         # the file and those it names: read again when one changes

    def san_refused(self, conn: ssl.SSLSocket) -> str | None:
        """Why a handshaken connection is refused by ``client_allowed_sans`` (None: it is not)."""
        if self.allowed_sans is None:
            return None
        cert: dict[str, Any] = dict(conn.getpeercert() or {})
        names: list[str] = []
        for kind, value in cert.get("subjectAltName", ()):
            if kind == "IP Address":
                try:
                    value = str(ipaddress.ip_address(value.strip()))
                except ValueError:
                    pass
            names.append(value)
        if any(n in self.allowed_sans for n in names):
            return None
        return f"no subject alternative name of the client certificate ({', '.join(names) or 'none'}) " \
               f"is in client_allowed_sans"


def _duplicate_checking_loader() -> Any:
    import yaml  # type: ignore[import-untyped, unused-ignore]

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader: Any, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} given twice",
                                                        key_node.start_mark)
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader


def _mapping(value: Any, where: str, allowed: set[str], fail: Callable[[str], Exception]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail(f"{where}: expected a mapping, not {type(value).__name__}")
    for k in value:
        if not isinstance(k, str) or k not in allowed:
            raise fail(f"{where}: unknown key {k!r} (known: {', '.join(sorted(allowed))})")
    return value


def _string(d: dict[str, Any], key: str, where: str, fail: Callable[[str], Exception]) -> str:
    v = d.get(key)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise fail(f"{where}.{key}: expected a string, not {type(v).__name__}")
    return v


def _duration(text: Any, fail: Callable[[str], Exception]) -> float:
    """A Go duration (``1s``, ``250ms``, ``1m30s``, ``0``) in seconds."""
    if text == 0 or text == "0":
        return 0.0
    if not isinstance(text, str) or not text or not re.fullmatch(rf"(?:{_DURATION.pattern})+", text):
        raise fail(f"rate_limit.interval: {text!r} is not a duration (such as 1s, 250ms, 1m30s)")
    return sum(float(n) * _UNITS[u] for n, u in _DURATION.findall(text))


def load(path: str) -> WebConfig:
    """Read and check the file, and its certificates and keys; :class:`WebConfigError` says why not."""
    import yaml  # type: ignore[import-untyped, unused-ignore]

    def fail(msg: str) -> WebConfigError:
        return WebConfigError(f"--web.config.file {path}: {msg}")

    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise fail(e.strerror or str(e)) from None
    try:
        doc = yaml.load(raw, Loader=_duplicate_checking_loader())  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"line {mark.line + 1}: " if mark is not None else ""
        what = " ".join(str(getattr(e, "problem", None) or e).split())
        raise fail(f"not YAML: {at}{what}") from None
    top = _mapping(doc, "the file", _TOP, fail)
    base = os.path.dirname(os.path.abspath(path))
    cfg = WebConfig(path=path)
    files = [os.path.abspath(path)]

    tls = _mapping(top.get("tls_server_config"), "tls_server_config", _TLS, fail)
    given = {k: _string(tls, k, "tls_server_config", fail) for k in
             ("cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type", "client_ca_file")}
    for k in ("cipher_suites", "curve_preferences"):
        if tls.get(k):
            raise fail(f"tls_server_config.{k}: not supported by pycore serve (Python's ssl takes OpenSSL's "
                       f"names and defaults): remove it")
    if any(given.values()):
        files += _tls(cfg, tls, given, base, fail)

    http = _mapping(top.get("http_server_config"), "http_server_config", _HTTP, fail)
    if not isinstance(http.get("http2", True), bool):
        raise fail("http_server_config.http2: expected true or false")
    headers = _mapping(http.get("headers"), "http_server_config.headers", set(_HEADERS), fail)
    for name, value in headers.items():
        if not isinstance(value, str):
            raise fail(f"http_server_config.headers.{name}: expected a string")
        if _HEADERS[name] and value not in _HEADERS[name]:
            raise fail(f"http_server_config.headers.{name}: {value!r} is not one of {', '.join(_HEADERS[name])}")
        if value:
            cfg.headers.append((name, value))

    users = top.get("basic_auth_users") or {}
    if not isinstance(users, dict):
        raise fail("basic_auth_users: expected a mapping of user names to bcrypt hashes")
    for user, hashed in users.items():
        if not isinstance(user, str) or not isinstance(hashed, str):
            raise fail(f"basic_auth_users: {user!r}: expected a user name and its bcrypt hash, both strings")
        m = _BCRYPT.fullmatch(hashed)
        if m is None or not 4 <= int(m.group(1)) <= 31:
            raise fail(f"basic_auth_users.{user}: not a bcrypt hash (htpasswd -nBC 10 \"\" | tr -d ':\\n' makes one)")
        cfg.users[user] = hashed.encode()

    rate = _mapping(top.get("rate_limit"), "rate_limit", {"interval", "burst"}, fail)
    if rate:
        cfg.rate_interval = _duration(rate.get("interval", 0), fail)
        burst = rate.get("burst", 0)
        if not isinstance(burst, int) or isinstance(burst, bool) or burst < 0:
            raise fail("rate_limit.burst: expected a whole number >= 0")
        cfg.rate_burst = burst
    cfg.files = tuple(files)
    return cfg


def _tls(cfg: WebConfig, tls: dict[str, Any], given: dict[str, str], base: str,
         fail: Callable[[str], Exception]) -> list[str]:
    """The server's SSLContext from tls_server_config (into ``cfg``); the files it read."""
    files = []

    def path_of(key: str) -> str:
        p = os.path.join(base, given[key])      # relative to the file's directory, as exporter-toolkit
        files.append(p)
        return p

    for inline, named in (("cert", "cert_file"), ("key", "key_file"), ("client_ca", "client_ca_file")):
        if given[inline] and given[named]:
            raise fail(f"tls_server_config: {inline} and {named} both given: give one")
    if not (given["cert"] or given["cert_file"]):
        raise fail("tls_server_config: missing one of cert or cert_file")
    if not (given["key"] or given["key_file"]):
        raise fail("tls_server_config: missing one of key or key_file")
    for k in ("min_version", "max_version"):
        if tls.get(k) is not None and tls[k] not in _VERSIONS:
            raise fail(f"tls_server_config.{k}: {tls[k]!r} is not one of {', '.join(_VERSIONS)}")
    low = _VERSIONS[tls.get("min_version") or "TLS12"]
    high = _VERSIONS[tls.get("max_version") or "TLS13"]
    if low > high:
        raise fail("tls_server_config: min_version is above max_version")
    prefer = tls.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        raise fail("tls_server_config.prefer_server_cipher_suites: expected true or false")

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.minimum_version, ctx.maximum_version = low, high
    except ValueError as e:
        raise fail(f"tls_server_config: {e}") from None
    if prefer:
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    else:
        ctx.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    with _pem_files(given, path_of, fail) as (certfile, keyfile):
        try:
            ctx.load_cert_chain(certfile, keyfile)
        except (ssl.SSLError, OSError) as e:
            what = given["cert_file"] or "cert"
            raise fail(f"tls_server_config: cannot load the certificate {what} with its key "
                       f"{given['key_file'] or 'key'}: {_reason(e)}") from None

    auth = given["client_auth_type"] or "NoClientCert"
    if auth == "RequireClientCert":             # exporter-toolkit's old name, still accepted there
        auth = "RequireAnyClientCert"
    if auth not in _AUTH_TYPES:
        raise fail(f"tls_server_config.client_auth_type: {auth!r} is not one of {', '.join(_AUTH_TYPES)}")
    has_ca = bool(given["client_ca"] or given["client_ca_file"])
    if has_ca and auth == "NoClientCert":
        raise fail("tls_server_config: a client CA is given without a client_auth_type that asks for certificates")
    if not has_ca and auth in ("RequireAnyClientCert", "RequireAndVerifyClientCert"):
        raise fail(f"tls_server_config: client_auth_type {auth} needs client_ca_file (the CA that signs the "
                   f"clients' certificates)")
    if has_ca:
        try:
            if given["client_ca_file"]:
                ctx.load_verify_locations(cafile=path_of("client_ca_file"))
            else:
                ctx.load_verify_locations(cadata=given["client_ca"])
        except (ssl.SSLError, OSError, ValueError) as e:
            raise fail(f"tls_server_config: cannot load the client CA {given['client_ca_file'] or 'client_ca'}: "
                       f"{_reason(e)}") from None
    # RequestClientCert: Go asks for a certificate and never checks it; nothing uses it, so not asking
    # accepts the same clients.  RequireAnyClientCert: OpenSSL verifies what it requires (stricter).
    ctx.verify_mode = {"NoClientCert": ssl.CERT_NONE, "RequestClientCert": ssl.CERT_NONE,
                       "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL}.get(auth, ssl.CERT_REQUIRED)
    sans = tls.get("client_allowed_sans")
    if sans is not None:
        if not isinstance(sans, list) or not all(isinstance(s, str) for s in sans):
            raise fail("tls_server_config.client_allowed_sans: expected a list of strings")
        if auth not in ("RequireAnyClientCert", "RequireAndVerifyClientCert"):
            raise fail("tls_server_config.client_allowed_sans requires client_auth_type RequireAnyClientCert "
                       "or RequireAndVerifyClientCert")
        cfg.allowed_sans = sans
    cfg.context = ctx
    return files


class _pem_files:
    """cert/key given inline or as files: paths for load_cert_chain (inline text in a memfd, not on disk)."""

    def __init__(self, given: dict[str, str], path_of: Callable[[str], str], fail: Callable[[str], Exception]):
        self.given, self.path_of, self.fail = given, path_of, fail
        self.fds: list[int] = []

    def _one(self, inline: str, named: str) -> str:
        if self.given[named]:
            p = self.path_of(named)
            try:
                with open(p, "rb"):
                    pass
            except OSError as e:
                raise self.fail(f"tls_server_config.{named} {self.given[named]}: {e.strerror}") from None
            return p
        fd = os.memfd_create(f"pycore-{inline}", os.MFD_CLOEXEC)
        self.fds.append(fd)
        os.write(fd, self.given[inline].encode())
        return f"/proc/self/fd/{fd}"

    def __enter__(self) -> tuple[str, str]:
        return self._one("cert", "cert_file"), self._one("key", "key_file")

    def __exit__(self, *exc: object) -> None:
        for fd in self.fds:
            os.close(fd)


def _reason(e: Exception) -> str:
    if isinstance(e, ssl.SSLError):
        return e.reason or re.sub(r"\s*\(_ssl\.c:\d+\)", "", " ".join(str(e).split()))
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return " ".join(str(e).split())


def _stamp(files: Iterable[str]) -> tuple[Any, ...]:
    out: list[tuple[int, int, int] | None] = []
    for p in files:
        try:
            st = os.stat(p)
            out.append((st.st_ino, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


def _linger(conn: ssl.SSLSocket, seconds: float = 1.0) -> None:
    """Let a refused client read the alert that says why before the connection goes.

    A TLS 1.3 client has finished its side of the handshake when it sends its certificate (or
    none), and writes its request at once, before it reads the server's verdict. Closed with that
    request unread, the socket sends a reset, which can reach the client before the alert: it
    then says "connection reset by peer" (Prometheus) or EOF (Python) instead of "certificate
    required" (4 of 100 refusals here). So our side is shut (the alert is already sent) and what
    the client sends is read and dropped until it closes, for at most ``seconds``."""
    try:
        conn.shutdown(socket.SHUT_WR)       # an SSLSocket drops its TLS state here: plain reads below
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            conn.settimeout(left)
            if not conn.recv(65536):
                break
    except (OSError, ValueError):
        pass


class WebConfigFile:
    """The file as the server uses it: read again when it or a file it names changed (checked at most
    once a second; a reading that fails keeps the last good one and says so once), basic auth with
    a cache of checked credentials (bcrypt is slow on purpose: ~70 ms a check at cost 10), the rate
    limit, the TLS handshake."""

    def __init__(self, path: str, log: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.config = load(path)
        self._stamp = _stamp(self.config.files)
        self._checked = time.monotonic()
        self._failed: str | None = None
        self._lock = threading.Lock()
        self._bcrypt = threading.Lock()         # one bcrypt at a time, as exporter-toolkit
        self._cache: dict[bytes, bool] = {}
        self._tokens = float(self.config.rate_burst)
        self._refill = time.monotonic()
        self._refused: dict[str, tuple[float, int]] = {}    # reason -> (last said, not said since)

    @property
    def tls(self) -> bool:
        return self.current().context is not None

    def current(self) -> WebConfig:
        now = time.monotonic()
        with self._lock:
            if now - self._checked < 1.0:
                return self.config
            self._checked = now
            stamp = _stamp(self.config.files)
            if stamp == self._stamp:
                return self.config
            self._stamp = stamp
            try:
                cfg = load(self.path)
            except WebConfigError as e:
                if str(e) != self._failed:
                    self._failed = str(e)
                    self.log(f"pycore serve: {e} (still serving with the file as it was)")
                return self.config
            if (cfg.context is None) != (self.config.context is None):
                self.log(f"pycore serve: --web.config.file {self.path}: TLS cannot be turned on or off "
                         f"while serving (restart): still serving with the file as it was")
                return self.config
            self._failed = None
            self._cache = {}        # (a new dict: a check under way fills the old one)
            self.config = cfg
            self._stamp = _stamp(cfg.files)
            self.log(f"pycore serve: --web.config.file {self.path}: read again")
            return cfg

    def handshake(self, sock: socket.socket, peer: Any, timeout: float = 10.0) -> ssl.SSLSocket | None:
        """The TLS side of one accepted connection (in its own thread: a slow or silent client holds
        up no other); None, the socket closed and the reason logged (at most once in 10 s), if refused."""
        cfg = self.current()
        assert cfg.context is not None
        conn = None
        try:
            sock.settimeout(timeout)
            conn = cfg.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            conn.do_handshake()
            why = cfg.san_refused(conn)
            if why is None:
                conn.settimeout(None)
                return conn
        except (OSError, ValueError) as e:
            why = _reason(e) if not isinstance(e, TimeoutError) else f"no handshake in {timeout:g} s"
        self._note_refused(peer, why)
        if conn is not None:
            _linger(conn)
        for s in (conn, sock):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass
        return None

    def _note_refused(self, peer: Any, why: str) -> None:
        """Each reason said at most once in 10 s, with how many were not said since (a port scan or
        a misconfigured scraper retrying fills no log)."""
        now = time.monotonic()
        with self._lock:
            at, n = self._refused.get(why, (0.0, 0))
            if now - at < 10.0:
                self._refused[why] = (at, n + 1)
                return
            if len(self._refused) > 100:
                self._refused.clear()
            self._refused[why] = (now, 0)
        more = f" ({n} more for this reason since it was last said)" if n else ""
        host = peer[0] if isinstance(peer, tuple) else peer
        self.log(f"pycore serve: TLS handshake with {host} refused: {why}{more}")

    def allowed(self, authorization: str) -> bool:
        """Whether an Authorization header passes basic_auth_users (any, when there are none)."""
        users = self.config.users
        if not users:
            return True
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, sep, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        if not sep:
            return False
        hashed = users.get(user)
        known = hashed is not None
        hashed = hashed or _DECOY
        # the cache keeps a digest of the password, not the password
        key = hashlib.sha256(b"\0".join((user.encode(), hashed, password.encode()))).digest()
        cache = self._cache
        ok = cache.get(key)
        if ok is None:
            import bcrypt

            with self._bcrypt:
                try:
                    ok = bcrypt.checkpw(password.encode(), hashed) and known
                except ValueError:
                    ok = False
                if len(cache) >= _CACHE_SIZE:       # the oldest out (the toolkit evicts at random)
                    cache.pop(next(iter(cache)), None)
                cache[key] = ok
        return ok and known

    def rate_allows(self) -> bool:
        """The token bucket of rate_limit (interval between requests, burst): False means 429."""
        cfg = self.config
        if cfg.rate_interval <= 0:
            return True
        now = time.monotonic()
        with self._lock:
            self._tokens = min(float(cfg.rate_burst), self._tokens + (now - self._refill) / cfg.rate_interval)
            self._refill = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False

    def wrap(self, app: Callable[..., Any]) -> Callable[..., Any]:
        """The WSGI app behind the file's rate limit, basic auth and headers (every path, as
        exporter-toolkit)."""

        def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            cfg = self.current()
            extra = list(cfg.headers)
            if not self.rate_allows():
                start_response("429 Too Many Requests", [("Content-Type", "text/plain; charset=utf-8"), *extra])
                return [b"Too Many Requests\n"]
            if not self.allowed(environ.get("HTTP_AUTHORIZATION", "")):
                start_response("401 Unauthorized", [("Content-Type", "text/plain; charset=utf-8"),
                                                    ("WWW-Authenticate", "Basic"), *extra])
                return [b"Unauthorized\n"]
            if not extra:
                return app(environ, start_response)

            def with_headers(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
                return start_response(status, headers + extra, *exc)

            return app(environ, with_headers)

        return guarded
