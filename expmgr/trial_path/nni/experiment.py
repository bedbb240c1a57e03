"""``nni.experiment`` where the light ``nni`` answers: expmgr's Experiment API
(``expmgr.experiment``), which stands where NNI's does. ``expctl run`` gives a script this
module's names even when a real NNI is installed (expmgr/experiment/nni_scripts.py)."""
from expmgr.experiment import *  # noqa: F401,F403 - NNI's names, expmgr's answers
from expmgr.experiment import __all__  # noqa: F401
