"""The dispatcher: the subprocess that hosts the tuner and the assessor.

The manager starts it as ``python -m expmgr.dispatcher`` and talks to it over
the framed JSON channel of :mod:`expmgr.dispatcher.protocol` on its stdin and
stdout. It exits when that channel closes. ``client`` is the runner's end of that
channel, beside the protocol it speaks.

May import: ``expmgr.algorithms`` and the bottom modules (layout, log, logreader, rotation, states,
metrics, trial); nothing from config, store, training, engine, server, experiment or cli.
"""
