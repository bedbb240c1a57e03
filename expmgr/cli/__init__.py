"""expctl, the command line of expmgr."""
