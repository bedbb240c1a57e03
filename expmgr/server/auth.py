"""Who may reach an experiment's server: the address it listens on (``--host``), the path
it serves under (``--url-prefix``, NNI's ``--url_prefix``) and the access token.

Listening on anything but loopback requires a token (one is generated when none is
given). With a token, every request but a trial's metric report (which carries its
own per-trial token) must carry it: in the ``X-Expmgr-Token`` header, as
``Authorization: Bearer <token>``, or in the cookie that opening the page once with
``?token=<token>`` sets (as Jupyter does). The token lives in the experiment's
``access.json`` (mode 0600) and never in a log::

    access = Access.decide("0.0.0.0", "/expmgr", None, sockets)   # generates a token
    access.save(paths.access_file)
    app = make_app(..., token=access.token, url_prefix=access.url_prefix)
    # every handler: def prepare(self): auth.check(self)
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import re
import secrets
import socket
import urllib.parse
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

import tornado.log
import tornado.web

DEFAULT_HOST = "127.0.0.1"
TOKEN_HEADER = "X-Expmgr-Token"
TOKEN_ENV = "EXPMGR_TOKEN"
"""Read by expctl as the default of ``--token``, so the token need not show in ``ps``."""
TOKEN_QUERY = "token"
TOKEN_SETTING = "expmgr_token"
"""The tornado application setting holding the token (None: no token required)."""
PREFIX_SETTING = "expmgr_url_prefix"
MIN_TOKEN_LENGTH = 16
_TOKEN = re.compile(r"[A-Za-z0-9._~-]+")
_SEGMENT = re.compile(r"[A-Za-z0-9._~-]+")


class AccessError(ValueError):
    """A bad ``host``, ``url_prefix`` or ``token``; ``field`` names the parameter."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def normalize_url_prefix(prefix: str | None) -> str:
    """``"expmgr"``, ``"/expmgr/"`` -> ``"/expmgr"``; ``""``, ``"/"``, None -> ``""``."""
    text = (prefix or "").strip("/")
    if not text:
        return ""
    segments = text.split("/")
    if any(not _SEGMENT.fullmatch(s) or s in (".", "..") for s in segments):
        raise AccessError("url_prefix", "expected a path of URL-safe segments (letters, digits, '._~-'), "
                                        f"such as /expmgr, got {prefix!r}")
    return "/" + "/".join(segments)


def validate_token(token: str) -> str:
    """``token`` when it is usable as an access token; AccessError otherwise."""
    if len(token) < MIN_TOKEN_LENGTH or not _TOKEN.fullmatch(token):
        raise AccessError("token", f"expected at least {MIN_TOKEN_LENGTH} characters of letters, digits and "
                                   f"'._~-' (or none, to have one generated), got {len(token)} characters"
                                   + ("" if _TOKEN.fullmatch(token or "x") else " with others among them"))
    return token


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _address(sock: socket.socket) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(sock.getsockname()[0].split("%")[0])


def loopback_only(sockets: list[socket.socket]) -> bool:
    """Whether every socket listens on a loopback address only."""
    return all(_address(sock).is_loopback for sock in sockets)


def local_address(sockets: list[socket.socket]) -> str:
    """The address a process on this machine (a trial, expctl) connects to: loopback
    when a socket listens on it or on every address, else the first bound address."""
    for sock in sockets:
        address = _address(sock)
        if address.is_loopback or address.is_unspecified:
            return "::1" if address.version == 6 else "127.0.0.1"
    return str(_address(sockets[0]))


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True)
class Access:
    """How one experiment's server is reached; stored in its ``access.json`` (0600)."""

    host: str = DEFAULT_HOST
    """The address given to listen on (``0.0.0.0``, ``::``, a LAN address, ...)."""
    url_prefix: str = ""
    """``""`` or ``/segment[/segment...]``: every route is served under it."""
    token: str | None = None
    """Required from every client but the trials; None: not required (loopback only)."""
    local_host: str = DEFAULT_HOST
    """The address clients on this machine (trials, expctl) connect to."""

    @classmethod
    def decide(cls, host: str, url_prefix: str | None, token: str | None,
               sockets: list[socket.socket]) -> "Access":
        """The access of a server listening on ``sockets`` (bound to ``host``): a token
        is generated when none is given and the server is reachable from elsewhere;
        AccessError for an empty ``token`` there, or a bad one or a bad ``url_prefix``."""
        prefix = normalize_url_prefix(url_prefix)
        if token is not None and token != "":
            validate_token(token)
        elif not loopback_only(sockets):
            if token == "":
                raise AccessError("token", f"listening on {host} (not loopback) requires an access token; "
                                           "give one, or none to have one generated")
            token = new_token()
        return cls(host=host, url_prefix=prefix, token=token or None, local_host=local_address(sockets))

    def save(self, path: Path) -> None:
        """Write (atomically) with mode 0600: the token is a secret."""
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask or an older file said
            os.write(fd, (json.dumps(asdict(self), indent=2) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)

    @classmethod
    def load(cls, path: Path) -> "Access":
        """The stored access; the default (loopback, no token) for an experiment that has
        none. AccessError when it cannot be read (another user's experiment)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError) as error:
            raise AccessError("access", f"cannot read {path} ({getattr(error, 'strerror', None) or error}); "
                                        "only the experiment's owner can reach it when it has a token") from None
        return cls(**{key: data[key] for key in ("host", "url_prefix", "token", "local_host") if key in data})

    def address(self, port: int, host: str | None = None) -> str:
        """``http://host:port[/prefix]``, as logged (``host`` default: the local address)."""
        return f"http://{_url_host(host or self.local_host)}:{port}{self.url_prefix}"

    def base_url(self, port: int, host: str | None = None) -> str:
        """``address`` + ``/``: what the routes' paths (``api/v1/...``) follow."""
        return self.address(port, host) + "/"

    def urls(self, port: int) -> list[str]:
        """The web UI's addresses as shown to the user, the page itself (``.../prefix/``,
        with ``?token=`` when there is one): the local one first, then (listening on every
        address) one per address of this machine."""
        hosts = [self.local_host]
        if self.host not in (self.local_host, "localhost") and not _is_loopback_name(self.host):
            hosts += _machine_addresses(self.host) if _is_unspecified(self.host) else [self.host]
        return [self.base_url(port, host) + f"?{TOKEN_QUERY}={self.token}" if self.token
                else self.base_url(port, host) if self.url_prefix else self.address(port, host)
                for host in dict.fromkeys(hosts)]

    def headers(self) -> dict[str, str]:
        """What a client sends to be let in."""
        return {TOKEN_HEADER: self.token} if self.token else {}


def _is_loopback_name(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _is_unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _machine_addresses(host: str) -> list[str]:
    """This machine's non-loopback addresses of the family of ``host`` (0.0.0.0 or ::)."""
    import psutil
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    found = []
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == family:
                ip = ipaddress.ip_address(address.address.split("%")[0])
                if not ip.is_loopback and not ip.is_link_local:
                    found.append(str(ip))
    return found


# -- the server side ------------------------------------------------------------

def cookie_name(token: str) -> str:
    """Named after the token's hash: experiments on other ports of the same host (which
    share cookies) each keep their own."""
    return "expmgr-token-" + hashlib.sha256(token.encode()).hexdigest()[:12]


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def check(handler: tornado.web.RequestHandler, *, page: bool = False) -> None:
    """Let the request through, or answer 401 and end it (tornado.web.Finish). Call first
    in ``prepare()``. ``page``: the UI's page, where a ``?token=`` link sets the cookie
    and redirects to the same address without it. Handlers with
    ``requires_access_token = False`` (the trials' reports) are let through."""
    token = handler.settings.get(TOKEN_SETTING)
    if not token or not getattr(handler, "requires_access_token", True):
        return
    headers = handler.request.headers
    if page and handler.request.method == "GET" and handler.get_query_argument(TOKEN_QUERY, None) is not None:
        if not _same(handler.get_query_argument(TOKEN_QUERY), token):
            _refuse(handler, f"the token in the link (?{TOKEN_QUERY}=) is wrong; "
                             "`expctl webui url` shows the right link")
        _set_cookie_and_redirect(handler, token)
    given = headers.get(TOKEN_HEADER)
    where = f"the {TOKEN_HEADER} header"
    if given is None:
        scheme, _, value = headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            given, where = value.strip(), "the Authorization header"
    if given is None:
        given, where = handler.get_cookie(cookie_name(token)), "the cookie"
    if given is None:
        _refuse(handler, f"this experiment requires its access token: send it in the {TOKEN_HEADER} header "
                         f"(or Authorization: Bearer), or open the web UI once with ?{TOKEN_QUERY}=<token> "
                         "(`expctl webui url` shows the link)")
    if not _same(given, token):
        _refuse(handler, f"the access token in {where} is wrong")


def _refuse(handler: tornado.web.RequestHandler, message: str) -> NoReturn:
    handler.clear()
    handler.set_status(401)
    handler.set_header("WWW-Authenticate", 'Bearer realm="expmgr"')
    handler.set_header("Content-Type", "application/json; charset=UTF-8")
    raise tornado.web.Finish(json.dumps({"error": message}))


def _set_cookie_and_redirect(handler: tornado.web.RequestHandler, token: str) -> None:
    prefix = handler.settings.get(PREFIX_SETTING) or ""
    handler.set_cookie(cookie_name(token), token, path=prefix + "/", httponly=True, samesite="Strict",
                       secure=handler.request.protocol == "https")
    query = [(k, v) for k, v in urllib.parse.parse_qsl(handler.request.query, keep_blank_values=True)
             if k != TOKEN_QUERY]
    handler.redirect(handler.request.path + (f"?{urllib.parse.urlencode(query)}" if query else ""))
    raise tornado.web.Finish()


_TOKEN_IN_QUERY = re.compile(rf"([?&]{TOKEN_QUERY}=)[^&]*")


def _log_request(handler: tornado.web.RequestHandler) -> None:
    """tornado's access log line, with the value of a ``?token=`` left out."""
    status = handler.get_status()
    log = (tornado.log.access_log.info if status < 400 else tornado.log.access_log.warning if status < 500
           else tornado.log.access_log.error)
    request = handler.request
    log("%d %s %s (%s) %.2fms", status, request.method, _TOKEN_IN_QUERY.sub(r"\1...", request.uri or ""),
        request.remote_ip, 1000.0 * request.request_time())


def settings(token: str | None, url_prefix: str) -> dict[str, Any]:
    """The tornado application settings ``check`` reads, and an access log without tokens."""
    return {TOKEN_SETTING: token, PREFIX_SETTING: url_prefix, "log_function": _log_request}
