"""Who may reach an experiment's server: the address it listens on (``--host``), the path
it serves under (``--url-prefix``, NNI's ``--url_prefix``) and the access token.

Listening on anything but loopback requires a token (one is generated when none is
given). With a token, every request but a trial's metric report (which carries its
own per-trial token) must carry it: in the ``X-Expmgr-Token`` header, as
``Authorization: Bearer <token>``, or in the cookie that opening the page once with
``?token=<token>`` sets (as Jupyter does; the cookie holds a value derived from the
token, named per port and experiment). Without a token (loopback only), a request is let
in only from a process of the user running the server (peers.py tells which user owns the
client's end); where that cannot be told (not Linux), a token is generated as off
loopback. The token lives in the experiment's ``access.json`` (mode 0600) and never in a
log::

    access = Access.decide("0.0.0.0", "/expmgr", None, sockets)   # generates a token
    access.save(paths.access_file)
    app = make_app(..., token=access.token, url_prefix=access.url_prefix)
    # every handler: def prepare(self): auth.check(self)
"""
from __future__ import annotations

import hashlib
import hmac
import html
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

from expmgr.engine.errors import RefusalKind
from expmgr.server import peers
from expmgr.server.refusals import RequestError, send_refusal
from expmgr.trial import ENV_ACCESS_TOKEN

DEFAULT_HOST = "127.0.0.1"
TOKEN_HEADER = "X-Expmgr-Token"
TOKEN_ENV = ENV_ACCESS_TOKEN
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
    """Required from every client but the trials; None: only the server's own user is let in (loopback only)."""
    local_host: str = DEFAULT_HOST
    """The address clients on this machine (trials, expctl) connect to."""

    @classmethod
    def decide(cls, host: str, url_prefix: str | None, token: str | None,
               sockets: list[socket.socket]) -> "Access":
        """The access of a server listening on ``sockets`` (bound to ``host``): a token
        is generated when none is given and the server is reachable from elsewhere, or
        when this system cannot tell which user a client is (peers.can_tell_peers);
        AccessError for an empty ``token`` off loopback, or a bad one or a bad ``url_prefix``."""
        prefix = normalize_url_prefix(url_prefix)
        if token is not None and token != "":
            validate_token(token)
        elif loopback_only(sockets) and not peers.can_tell_peers():
            token = new_token()  # no other way to keep other users out
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

def cookie_name(token: str, port: int) -> str:
    """The cookie of the experiment with ``token`` served on ``port``: a browser sends the
    cookies of 127.0.0.1 to every port of it, so each server (port) and experiment (token)
    names its own."""
    return f"expmgr-{port}-" + _derived(token, "cookie name")[:12]


def cookie_value(token: str, port: int) -> str:
    """What the cookie holds: derived from the token, not the token, and good on ``port``
    only; another server on 127.0.0.1 that receives it learns neither the token nor a key
    to another experiment."""
    return _derived(token, f"cookie {port}")


def _derived(token: str, purpose: str) -> str:
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def check(handler: tornado.web.RequestHandler, *, page: bool = False) -> None:
    """Let the request through, or answer 401 (no or a wrong token) or 403 (another user)
    and end it (tornado.web.Finish). Call first in ``prepare()``. ``page``: the UI's page,
    where a ``?token=`` link sets the cookie and redirects to the same address without it.
    Handlers with ``requires_access_token = False`` (the trials' reports) are let through.
    Without a token (a loopback server), only processes of the server's own user are let
    in (``_check_same_user``)."""
    if not getattr(handler, "requires_access_token", True):
        return
    token = handler.settings.get(TOKEN_SETTING)
    if not token:
        _check_same_user(handler)
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
        port = _server_port(handler)
        cookie = None if port is None else handler.get_cookie(cookie_name(token, port))
        if cookie is not None:
            if port is None or not _same(cookie, cookie_value(token, port)):
                _refuse(handler, "the access cookie is wrong; open the web UI again with "
                                 f"?{TOKEN_QUERY}=<token> (`expctl webui url` shows the link)")
            return
    if given is None:
        _refuse(handler, f"this experiment requires its access token: send it in the {TOKEN_HEADER} header "
                         f"(or Authorization: Bearer), or open the web UI once with ?{TOKEN_QUERY}=<token> "
                         "(`expctl webui url` shows the link)")
    if not _same(given, token):
        _refuse(handler, f"the access token in {where} is wrong")


def _connection_socket(handler: tornado.web.RequestHandler) -> socket.socket | None:
    stream = getattr(handler.request.connection, "stream", None)
    return getattr(stream, "socket", None)


def _server_port(handler: tornado.web.RequestHandler) -> int | None:
    """The port the request came in on (a browser's cookies do not tell ports apart)."""
    sock = _connection_socket(handler)
    try:
        return None if sock is None else int(sock.getsockname()[1])
    except (OSError, IndexError):
        return None


_PEER_UID = "expmgr_peer_uid"
"""The attribute of a connection's stream holding its client's uid, looked up once per connection."""


def _check_same_user(handler: tornado.web.RequestHandler) -> None:
    """Let in a client whose socket belongs to the user running this server, as Linux tells
    (peers.py); refuse (403) any other user, and any client whose user cannot be told."""
    stream = getattr(handler.request.connection, "stream", None)
    uid = getattr(stream, _PEER_UID, False)
    if uid is False:  # first request on this connection
        sock = _connection_socket(handler)
        uid = None if sock is None else peers.connection_peer_uid(sock)
        if stream is not None:
            setattr(stream, _PEER_UID, uid)
    if uid is not None and uid == os.geteuid():
        return
    who = "whose user cannot be told" if uid is None else f"of user {_user_name(uid)}"
    handler.clear()
    send_refusal(handler, RequestError(RefusalKind.FORBIDDEN, (
        f"this experiment has no access token, so its server lets in only processes of the user running it "
        f"({_user_name(os.geteuid())}); this client is {who}. To share it, its owner runs it with an access "
        f"token (--token, or ${TOKEN_ENV}; `expctl resume <id> --token <token>`), which clients send in the "
        f"{TOKEN_HEADER} header, as Authorization: Bearer <token>, or with ?{TOKEN_QUERY}=<token> in the web "
        "UI's address (docs/security.md)")))
    raise tornado.web.Finish()


def _user_name(uid: int) -> str:
    try:
        import pwd
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _refuse(handler: tornado.web.RequestHandler, message: str) -> NoReturn:
    """Answer 401: a small page to a browser opening the web UI, ``{"error": message}`` to anything else."""
    handler.clear()
    handler.set_status(401)
    handler.set_header("WWW-Authenticate", 'Bearer realm="expmgr"')
    if _wants_page(handler):
        handler.set_header("Content-Type", "text/html; charset=UTF-8")
        raise tornado.web.Finish(_token_page(message))
    handler.set_header("Content-Type", "application/json; charset=UTF-8")
    raise tornado.web.Finish(json.dumps({"error": message}))


def _wants_page(handler: tornado.web.RequestHandler) -> bool:
    """Whether the request is a browser opening a page (it accepts HTML, and is no REST route):
    REST clients, the page's own requests among them, are answered JSON."""
    prefix = handler.settings.get(PREFIX_SETTING) or ""
    path = handler.request.path[len(prefix):] if handler.request.path.startswith(prefix) else handler.request.path
    return (handler.request.method in ("GET", "HEAD") and not path.startswith("/api/")
            and "text/html" in handler.request.headers.get("Accept", ""))


def _token_page(problem: str) -> str:
    """The page a browser is shown without the right token: what is wrong and how to get the link."""
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<title>Access token needed · expmgr</title>"
        "<style>body{font:15px/1.5 system-ui,sans-serif;max-width:40em;margin:3em auto;padding:0 1em;color:#1f2430}"
        "code{background:#eef0f3;padding:1px 4px;border-radius:4px}</style></head><body>"
        "<h1>This link needs the experiment's access token</h1>"
        "<p>This experiment's web UI is opened with a link that carries its token, "
        f"<code>http://…/?{TOKEN_QUERY}=…</code>: <code>expctl create</code> (and <code>expctl resume</code>, "
        "<code>expctl view</code>) print it when they start the experiment's server, and "
        "<code>expctl webui url &lt;experiment id&gt;</code> prints it again, on the machine the experiment runs on. "
        "Open that link once: the browser then keeps the access in a cookie for this address.</p>"
        f"<p>What the server found: {html.escape(problem)}.</p>"
        "</body></html>\n")


def _set_cookie_and_redirect(handler: tornado.web.RequestHandler, token: str) -> None:
    prefix = handler.settings.get(PREFIX_SETTING) or ""
    port = _server_port(handler)
    if port is None:
        _refuse(handler, "the connection closed")
    handler.set_cookie(cookie_name(token, port), cookie_value(token, port), path=prefix + "/", httponly=True,
                       samesite="Strict", secure=handler.request.protocol == "https")
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
