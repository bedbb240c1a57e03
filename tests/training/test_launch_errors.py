"""Which launch failures are the system's and which the trial's (``training.base.launch_error``,
the one rule every service raises by): the runner leaves a trial WAITING and pauses
launching for the first, and ends the attempt FAILED for the second."""
from __future__ import annotations

import errno
import os

import pytest

from expmgr.training import SystemLaunchError, TrainingServiceError
from expmgr.training.base import launch_error

SYSTEM = [errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.ENOMEM, errno.EAGAIN,
          errno.EIO]


def _error(number: int) -> OSError:
    return OSError(number, os.strerror(number), "/home/exp/trials/Ab3dE")


@pytest.mark.parametrize("number", SYSTEM, ids=errno.errorcode.get)
@pytest.mark.parametrize("in_trial_folder", [True, False], ids=["folder", "command"])
def test_no_descriptor_memory_or_room_is_the_systems_wherever_a_launch_meets_it(number: int, in_trial_folder: bool):
    error = launch_error("Ab3dE", _error(number), in_trial_folder=in_trial_folder)
    assert isinstance(error, SystemLaunchError)
    assert str(error).startswith("cannot start trial Ab3dE: ") and os.strerror(number) in str(error)


@pytest.mark.parametrize("number", [errno.EACCES, errno.EPERM, errno.ENOENT], ids=errno.errorcode.get)
def test_a_trial_folder_gone_or_unwritable_is_the_systems_but_a_command_that_cannot_run_is_the_trials(number: int):
    assert isinstance(launch_error("Ab3dE", _error(number), in_trial_folder=True), SystemLaunchError)
    refused = launch_error("Ab3dE", _error(number), in_trial_folder=False)
    assert isinstance(refused, TrainingServiceError) and not isinstance(refused, SystemLaunchError)


def test_other_errors_are_the_trials():
    for number in (errno.ENOEXEC, errno.E2BIG, errno.ENOTDIR):
        error = launch_error("Ab3dE", _error(number), in_trial_folder=True)
        assert not isinstance(error, SystemLaunchError), errno.errorcode[number]
