"""Checking, within seconds, that Ray's GCS listens at a ``trainingService.address`` before
``ray.init`` (which retries for minutes, blocking the experiment's loop and so a stop)::

    await check_reachable("10.0.0.5:6379")   # TrainingServiceError, one line naming the address
"""
from __future__ import annotations

import asyncio

from expmgr.training.base import TrainingServiceError

_CONNECT_TIMEOUT = 10.0
"""How long connecting to the address, and its answer as Ray's GCS, may take: a live GCS
answers in milliseconds; generous for a loaded or distant head, short enough for a user waiting."""


async def check_reachable(address: str) -> None:
    """A clear error within seconds unless Ray's GCS listens at ``address`` (Ray itself retries
    for minutes, blocking the loop and so a stop): the address must accept a connection and
    answer the opening of an HTTP/2 (gRPC) connection with HTTP/2 settings, as the GCS does."""
    if address == "auto":
        return  # Ray finds this node's cluster, or says at once that there is none
    host, _, port = address.rpartition(":")
    where = f"cannot connect to the Ray cluster at trainingService.address {address!r}"
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), int(port)),
                                                _CONNECT_TIMEOUT)
    except (OSError, ValueError, asyncio.TimeoutError) as error:
        raise TrainingServiceError(f"{where}: {error or f'no answer within {_CONNECT_TIMEOUT:.0f} s'}; "
                                   f"is 'ray start --head' running there?") from None
    try:
        writer.write(_HTTP2_PREFACE + _HTTP2_EMPTY_SETTINGS)
        answer = await asyncio.wait_for(reader.readexactly(9), _CONNECT_TIMEOUT)
    except asyncio.TimeoutError:
        raise TrainingServiceError(f"{where}: something listens there but did not answer as Ray's GCS within "
                                   f"{_CONNECT_TIMEOUT:.0f} s; give the address 'ray start --head' printed") from None
    except (OSError, asyncio.IncompleteReadError) as error:
        raise TrainingServiceError(f"{where}: what listens there closed the connection ({error}); it is not "
                                   f"Ray's GCS: give the address 'ray start --head' printed") from None
    finally:
        writer.close()
    if answer[3] != _HTTP2_SETTINGS:
        raise TrainingServiceError(f"{where}: what listens there is not Ray's GCS (it answered {answer!r}); "
                                   f"give the address 'ray start --head' printed")


_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HTTP2_SETTINGS = 0x4
_HTTP2_EMPTY_SETTINGS = bytes([0, 0, 0, _HTTP2_SETTINGS, 0, 0, 0, 0, 0])
"""An HTTP/2 frame header: length 0, type SETTINGS, no flags, stream 0."""
