"""The dispatcher: the subprocess that hosts the tuner and the assessor.

The manager starts it as ``python -m expmgr.dispatcher`` and talks to it over
the framed JSON channel of :mod:`expmgr.dispatcher.protocol` on its stdin and
stdout. It exits when that channel closes.
"""
