"""The experiment's HTTP and websocket server: NNI's REST routes, the live updates,
the views that shape store records for them, log tails, the web UI's static files,
the guard in front of every route and the access token.

May import: ``expmgr.engine`` (the runner it hands submissions to), the store,
training, dispatcher and config packages, ``expmgr.algorithms`` and the bottom
modules (layout, log, logreader, rotation, states, metrics, trial); nothing from experiment or cli.
"""
