"""expctl, the command line of expmgr.

May import: everything below it (experiment, server, engine, store, training,
dispatcher, config, algorithms and the bottom modules); it is the top layer.
"""
