"""Entry point of the dispatcher process: ``python -m expmgr.dispatcher --log-file F --log-level L``.

It moves the command channel off fds 0 and 1 first, so that whatever a tuner
prints lands in its log instead of corrupting the channel, and puts NNI's ``nni``
package (``expmgr/trial_path``) last on ``sys.path`` for custom tuners written for NNI.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m expmgr.dispatcher")
    parser.add_argument("--log-file", type=Path, required=True)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--log-limits", default=None, help="MAX_BYTES:FILES_KEPT (expmgr.rotation)")
    args = parser.parse_args(argv)

    channel_in = os.fdopen(os.dup(0), "rb")
    channel_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)  # stdout joins stderr, which the manager points at the log file
    sys.stdout = sys.stderr

    from expmgr.log import setup_dispatcher_logging
    from expmgr.rotation import UNBOUNDED, RotationLimits
    # stdout and stderr (a tuner's prints, a traceback) follow dispatcher.log across rotations
    setup_dispatcher_logging(args.log_file, args.log_level, RotationLimits.from_env(args.log_limits) or UNBOUNDED,
                             descriptors=(1, 2))

    # NNI's `nni` (expmgr/trial_path), last: custom tuners and assessors written for NNI import
    # nni.tuner, nni.assessor, nni.utils; a real NNI installed here comes first and is theirs.
    from expmgr.trial import TRIAL_PATH
    sys.path.append(TRIAL_PATH)
    from expmgr.dispatcher.host import serve
    return serve(channel_in, channel_out)


if __name__ == "__main__":
    sys.exit(main())
