"""The remote training service's parts (NNI's ``platform: remote``): trials on the user's
machines reached by SSH, with no shared filesystem. ``ssh`` is the transport (one
``HostConnection`` per host, from an ``SshTarget``); ``host_agent`` the program run on each
host, ``agent_client`` the manager's end of it, ``runtime`` what is uploaded beside it.

Nothing is imported here: asyncssh (through ``ssh``) is slow to import, and the agent's
modules are run by path on hosts."""
