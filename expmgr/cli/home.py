"""``expctl ui``: the web UI's experiments page for every experiment of the registry
($EXPMGR_HOME), served until Ctrl+C or SIGTERM; running experiments open on their own
servers, ended ones read-only on this one (expmgr.experiment.home_server)::

    expctl ui [--port 8000] [--host 0.0.0.0] [--url-prefix /expmgr] [--token T]
"""
from __future__ import annotations

import argparse
import signal
import threading

from expmgr.cli.common import EXIT_OK, CliError, port_number, registry
from expmgr.cli.launch import _access_arguments, _flag_error
from expmgr.layout import default_home
from expmgr.server import auth

DEFAULT_PORT = 8000
"""Not 8080, which experiments take by default."""


def add_parser(commands: argparse._SubParsersAction) -> None:
    ui = commands.add_parser("ui", help="serve the web UI's page of all experiments until Ctrl+C")
    ui.add_argument("--port", "-p", type=port_number, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    ui.add_argument("--host", default=auth.DEFAULT_HOST,
                    help="address to listen on (default 127.0.0.1, this machine only; elsewhere an access token "
                         "is required, and generated if not given)")
    ui.add_argument("--url-prefix", "--url_prefix", "-u", default="", metavar="PREFIX",
                    help="serve the page and every route under this path, e.g. /expmgr")
    ui.add_argument("--token", default=None,
                    help=f"access token every client must give (default: ${auth.TOKEN_ENV}; else none on loopback, "
                         "where only your own user's processes get in, and generated elsewhere)")
    ui.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from expmgr.experiment import ExperimentError, HostError, PortInUseError
    from expmgr.experiment.home_server import HomeServer
    from expmgr.experiment.interrupts import StopSignal, raise_stop_signal
    from expmgr.experiment.listening import check_server_limits, server_sockets
    try:
        check_server_limits()
        sockets, access = server_sockets(args.port, **_access_arguments(args))
    except PortInUseError as error:
        raise CliError(f"--port {args.port}: {error}") from None
    except (HostError, auth.AccessError) as error:
        raise CliError(_flag_error(error)) from None
    except ExperimentError as error:
        raise CliError(str(error)) from None
    server = HomeServer(default_home(), sockets, access)
    previous_handler = None
    if threading.current_thread() is threading.main_thread():
        previous_handler = signal.signal(signal.SIGTERM, raise_stop_signal)
    try:
        server.start()
        print(f"all experiments of {registry().path}: " + "  ".join(access.urls(server.port)), flush=True)
        print("Ctrl+C stops this server (the experiments keep running)", flush=True)
        server.wait()
    except (KeyboardInterrupt, StopSignal):
        pass
    finally:
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)
        server.stop()
    return EXIT_OK
