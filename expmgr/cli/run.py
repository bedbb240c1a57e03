"""``expctl run SCRIPT [ARGS...]``: an NNI launcher script (or notebook) run as it is,
its ``from nni.experiment import Experiment`` answered by expmgr (see
expmgr/experiment/nni_scripts.py)::

    expctl run main.py                        # NNI's hpo_quickstart_pytorch/main.py, unchanged
    expctl run --port 0 main.py --epochs 3    # whatever port it names, a free one
    expctl run python_api_start.ipynb         # the notebook's code cells, in order

The exit status is the script's, as ``python SCRIPT`` gives it: 0, its ``sys.exit`` code,
1 after an uncaught exception (its traceback on stderr), 130 after Ctrl+C.
"""
from __future__ import annotations

import argparse
import traceback
import sys
from pathlib import Path

from expmgr.cli.common import EXIT_FAILED, EXIT_OK, EXIT_STOPPED, CliError


def add_parser(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="run an NNI launcher script or notebook as it is, with expmgr as "
                                          "its nni.experiment")
    run.add_argument("--port", "-p", type=int, default=None,
                     help="every experiment the script starts listens on this port, whatever port it names "
                          "(0: a free one); default: the script's")
    run.add_argument("script", type=Path, help="a Python script, or a Jupyter notebook (.ipynb)")
    run.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments (sys.argv[1:])")
    run.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    from expmgr.experiment.nni_scripts import NotebookError, nni_names, run_notebook, run_script
    script: Path = args.script
    if not script.is_file():
        raise CliError(f"no such file: {script}")
    if args.port is not None and not 0 <= args.port <= 65535:
        raise CliError(f"--port: expected 0 to 65535, got {args.port}")
    notebook = script.suffix == ".ipynb"
    if notebook and args.args:
        raise CliError(f"a notebook takes no arguments (got {' '.join(args.args)})")
    try:
        with nni_names(args.port):
            if notebook:
                run_notebook(script)
            else:
                run_script(script, args.args)
    except NotebookError as error:
        raise CliError(str(error)) from None
    except SystemExit as exit_:
        return _exit_status(exit_.code)
    except KeyboardInterrupt:
        return EXIT_STOPPED
    except Exception as error:   # the script's own failure: its traceback, status 1, as python gives
        _print_script_traceback(error)
        return EXIT_FAILED
    return EXIT_OK


def _print_script_traceback(error: BaseException) -> None:
    """The traceback Python would print for the script: without expctl's own frames."""
    tb = error.__traceback__
    ours = {__file__, sys.modules["expmgr.experiment.nni_scripts"].__file__}
    while tb is not None and (tb.tb_frame.f_code.co_filename in ours
                              or tb.tb_frame.f_code.co_filename.startswith("<frozen runpy")):
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb)


def _exit_status(code: object) -> int:
    """``sys.exit(code)``'s status, as Python computes it."""
    if code is None:
        return EXIT_OK
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return EXIT_FAILED
