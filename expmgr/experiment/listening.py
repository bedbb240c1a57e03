"""Where an experiment's server listens, checked before anything is created: the sockets
on host:port with the access (url prefix, token) of a server on them, and the server's
limits from the environment::

    check_server_limits()
    sockets, access = server_sockets(8080, "127.0.0.1", "", None)
"""
from __future__ import annotations

import errno
import socket

from expmgr.experiment.errors import ExperimentError, HostError, PortInUseError
from expmgr.server.auth import Access, AccessError, normalize_url_prefix, validate_token
from expmgr.server.guard import LimitsError, ServerLimits


def server_sockets(port: int, host: str, url_prefix: str | None, token: str | None) -> tuple[list, Access]:
    """Sockets bound to host:port and the access of a server on them; AccessError,
    HostError or PortInUseError (nothing left open) when that cannot be."""
    from tornado.netutil import bind_sockets
    normalize_url_prefix(url_prefix)  # a bad prefix or token is refused before anything listens
    if token:
        validate_token(token)
    try:
        sockets = bind_sockets(port, host)
    except socket.gaierror as error:
        raise HostError(f"host: cannot listen on {host!r}: {error.strerror}; give an address of this "
                        "machine, such as 127.0.0.1, 0.0.0.0 or ::") from error
    except OSError as error:
        if error.errno == errno.EADDRNOTAVAIL:
            raise HostError(f"host: cannot listen on {host}: {error.strerror}; it is not an address of this "
                            "machine") from error
        raise PortInUseError(f"cannot listen on {host}:{port}: {error.strerror}; "
                             "choose another port (--port)") from error
    try:
        return sockets, Access.decide(host, url_prefix, token, sockets)
    except AccessError:
        for sock in sockets:
            sock.close()
        raise


def check_server_limits() -> None:
    """Refuse bad EXPMGR_MAX_* variables (docs/security.md) before anything is created; the
    server reads them again when it starts."""
    try:
        ServerLimits.from_environment()
    except LimitsError as error:
        raise ExperimentError(str(error)) from None
