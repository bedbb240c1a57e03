"""The remote training service's parts (NNI's ``platform: remote``): trials on the user's
machines reached by SSH, with no shared filesystem. ``service`` is the training service (one
``_host.RemoteHost`` per machine; ``host_gpus`` its GPUs by ``nvidia-smi`` over SSH; ``files``
its trials' files); ``ssh`` the transport (one ``HostConnection`` per host, from an
``SshTarget``); ``_report_relay`` carries trials' reports to the manager's server; ``host_agent``
is the program run on each host, ``agent_client`` the manager's end of it, ``runtime`` what is
uploaded beside it. docs/remote.md is the user's guide.

Nothing is imported here: asyncssh (through ``ssh``) is slow to import, and the agent's
modules are run by path on hosts."""
