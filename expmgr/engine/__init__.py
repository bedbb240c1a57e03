"""The experiment's decision loop: the trial runner that asks the dispatcher for
trials, launches them on the training service, reads their reports and writes
every outcome to the store.

May import: the store, training, dispatcher and config packages,
``expmgr.algorithms`` and the bottom modules (layout, log, states, metrics, trial);
nothing from server, experiment or cli.
"""
