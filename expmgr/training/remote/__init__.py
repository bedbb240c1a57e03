"""The remote training service's parts (NNI's ``platform: remote``): trials on the user's
machines reached by SSH, with no shared filesystem. ``ssh`` is the transport: one
``HostConnection`` per host, made from an ``SshTarget``.

    from expmgr.training.remote import HostConnection, SshTarget
    connection = await HostConnection.connect(SshTarget(host="gpu1", user="bob"))
"""
from __future__ import annotations

from expmgr.training.remote.ssh import CommandResult, HostConnection, RemoteHostError, RemoteProcess, SshTarget

__all__ = ["CommandResult", "HostConnection", "RemoteHostError", "RemoteProcess", "SshTarget"]
