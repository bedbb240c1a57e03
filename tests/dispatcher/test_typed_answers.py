"""The client's typed calls (the engine's Dispatcher protocol) against a real dispatcher
process: the channel's reply frames become answers, so the runner reads no frame keys."""
from __future__ import annotations

import asyncio
from pathlib import Path

from expmgr.dispatcher.answers import Assessment, Generated, NoMoreTrials
from expmgr.dispatcher.client import DispatcherClient

STOPPER = """\
from expmgr.algorithms.assessor import Assessor, AssessResult


class NegativeStopper(Assessor):
    def assess_trial(self, trial_job_id, trial_history):
        return AssessResult.Bad if trial_history[-1] < 0 else AssessResult.Good
"""


def test_generate_and_assess_answer_with_typed_values(tmp_path: Path):
    (tmp_path / "negative_stopper.py").write_text(STOPPER)

    async def scenario() -> None:
        client = DispatcherClient(tmp_path / "dispatcher.log", "info")
        await client.start()
        try:
            await client.initialize({"x": {"_type": "choice", "_value": [3, 4]}},
                                    {"name": "GridSearch", "classArgs": {}},
                                    {"className": "negative_stopper.NegativeStopper",
                                     "codeDirectory": str(tmp_path), "classArgs": {}})
            assert await client.generate(0) == Generated({"x": 3})
            assert await client.generate(1) == Generated({"x": 4})
            assert await client.generate(2) == NoMoreTrials()
            assert await client.assess("t1", [0.5, 0.25]) is Assessment.KEEP
            assert await client.assess("t1", [0.5, -1.0]) is Assessment.STOP
            assert client.failure is None
        finally:
            await client.stop()

    asyncio.run(scenario())
