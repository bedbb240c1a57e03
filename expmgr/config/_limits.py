"""Upper bounds on config values and config files, documented in docs/config.md ("Limits").

The same bounds hold for a config file, an ``ExperimentConfig`` built in Python and every
change made while the experiment runs (REST, ``expctl update``, ``Experiment.update_*``).
"""
from __future__ import annotations

from expmgr.algorithms.search_space import SIGMAS_DRAWN   # the tuners' own bound, re-exported

MAX_TRIAL_CONCURRENCY = 10_000
MAX_TRIAL_NUMBER = 10**9
MAX_TRIAL_RETRIES = 1_000
MAX_TRIAL_GPU_NUMBER = 1_024
MAX_TRIALS_PER_GPU = 1_000
DEFAULT_TRIAL_PROCESS_LIMIT = 4_096
"""A local trial's processes at once (``trialProcessLimit``): far above what a trial needs (a
worker per core of a large machine, with data loaders, is a few hundred), far below the
pids a machine has (``pid_max`` is 32,768 on older kernels): a fork bomb is ended before it
takes them all. 0 turns the limit off."""
MAX_TRIAL_PROCESS_LIMIT = 4_194_304
"""Linux's largest ``pid_max``: a trial can never have more processes."""
MAX_PENDING_TRIALS = MAX_TRIAL_CONCURRENCY
"""A Ray training service's ``maxPendingTrials``: trials submitted to Ray and not yet started."""
MAX_TRIAL_MEMORY_BYTES = 2**50
"""A Ray trial's ``memory``: 1 PiB, more than any node holds (a larger value is almost surely a
typo, and Ray keeps resource amounts as 64-bit fixed-point numbers)."""
MAX_DURATION_SECONDS = 3650 * 86400.0
"""Ten years: longer durations are almost surely a typo (and overflow timers)."""

MAX_CONFIG_BYTES = 1024 * 1024
MAX_SEARCH_SPACE_BYTES = 16 * 1024 * 1024
MAX_YAML_NODES = 1_000_000
"""How many values YAML aliases may expand a document to (a "billion laughs" stops here);
a document without aliases is never refused by it."""

MAX_PARAMETERS = 10_000
"""Parameters in a search space, nested ones included."""
MAX_CHOICE_OPTIONS = 100_000
MAX_NESTING = 16
"""Levels of choices nested in choices."""
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1
"""``randint`` bounds must fit a 64-bit integer, which tuners sample with; so must ``upper - lower``."""
MAX_Q_STEPS = 2.0**53
"""Steps of q in a q type's range (``(high - low) / q``; for qnormal and qlognormal the range
where values are drawn): beyond 2**53 the steps are not distinct floating-point numbers, and
tuners that count or enumerate them overflow."""
# SIGMAS_DRAWN (imported above): normal types are drawn from ``mu ± SIGMAS_DRAWN * sigma``
# (tuners keep their draws there); that range, and ``exp`` of it for lognormal and qlognormal,
# must be finite numbers.
MAX_LOG_EXPONENT = 709.78
"""The largest x whose ``exp(x)`` is a finite 64-bit float (log(1.797e308) = 709.7827...)."""
MAX_LOG_FILES_KEPT = 1_000
