"""The dispatcher's command loop: it hosts the tuner and assessor and answers the manager.

Each request is handled in order; an exception in the tuner or assessor is
answered with its traceback and ends the process with status 1, since the
experiment cannot go on without its tuner. A frame that cannot be used (too large,
not JSON, an unknown command) is answered with an error marked ``"fatal": false``
and the dispatcher goes on: it changed nothing. So is a search space update the tuner
cannot use: the tuner keeps the old space (``SpaceRefused``).

Asking ahead: right after it answered a ``generate``, the dispatcher computes the next
parameters of a tuner that declares it harmless (``Tuner.ask_ahead_safe``: Random,
GridSearch, Batch) and keeps them, so that the next ``generate`` is answered at once
(``NoMoreTrialError`` is kept as the next answer too). The tuner is told every result and
trial end as it always is. Kept parameters are not a trial: they are not in the manager's
store until a ``generate`` hands them out, so a stop loses them and a resume generates them
again; before a search space update or an import, which they did not see, they are given
back to the tuner (``take_back``).
"""
from __future__ import annotations

import copy
import logging
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable

from expmgr.algorithms import create_assessor, create_tuner, instantiate, load_custom_class, search_space_refusal
from expmgr.algorithms.assessor import AssessResult
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError, NoTrialYetError
from expmgr.dispatcher.protocol import FrameTooLarge, ProtocolError, read_frame, write_frame

_logger = logging.getLogger("nni.dispatcher")


def _build(spec: dict[str, Any] | None, create_builtin: Callable) -> Any:
    if spec is None:
        return None
    class_args = spec.get("classArgs") or {}
    if spec.get("className"):
        code_directory = spec.get("codeDirectory")
        cls = load_custom_class(spec["className"], Path(code_directory) if code_directory else None)
        return instantiate(cls, class_args, f"className {spec['className']!r}")
    return create_builtin(spec["name"], class_args)


class SpaceRefused(Exception):
    """The tuner cannot use a new search space; it keeps the old one and the dispatcher goes on."""


@dataclass
class _Ahead:
    """The next answer of ``generate_parameters``, computed before it was asked for."""

    parameters: dict[str, Any] | None = None
    error: Exception | None = None
    """What it raised instead (NoMoreTrialError when the tuner has no more)."""

    def result(self) -> dict[str, Any]:
        if self.error is not None:
            raise self.error
        assert self.parameters is not None
        return self.parameters


class DispatcherHost:
    """Answers the manager's commands with the tuner and assessor it builds on ``initialize``.

    Either may be absent: a strategy experiment with an assessor has no tuner, so the
    tuner's commands (search space, results, imports) are then ignored."""

    def __init__(self) -> None:
        self.tuner: Any = None
        self._tuner_spec: dict[str, Any] | None = None
        """The tuner's config section, to build it again (a search space update is checked so)."""
        self.assessor: Any = None
        self._asks_ahead = False
        """Whether the tuner's class declares asking ahead harmless (its own ``ask_ahead_safe``)."""
        self._ahead: _Ahead | None = None
        self._next_parameter_id: int | None = None
        """The id after the last one answered, while the next parameters are to be computed ahead."""

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, "_cmd_" + str(message.get("cmd")), None)
        if handler is None:
            raise ProtocolError(f"unknown dispatcher command {str(message.get('cmd'))[:100]!r}")
        return handler(message) or {}

    def _cmd_initialize(self, message: dict[str, Any]) -> None:
        self._tuner_spec = message.get("tuner")
        self.tuner = _build(self._tuner_spec, create_tuner)
        self.assessor = _build(message.get("assessor"), create_assessor)
        if self.tuner is not None:
            self.tuner.update_search_space(message["search_space"])
            # The class's own declaration: a subclass that learns must not inherit it.
            self._asks_ahead = vars(type(self.tuner)).get("ask_ahead_safe", False) is True
            _logger.info("tuner %s ready%s", type(self.tuner).__name__,
                         " (it asks ahead)" if self._asks_ahead else "")
        if self.assessor is not None:
            _logger.info("assessor %s ready", type(self.assessor).__name__)

    def _cmd_update_search_space(self, message: dict[str, Any]) -> None:
        """Take a new search space. A space the tuner cannot use is refused (``SpaceRefused``)
        and the tuner keeps the old one: a tuner built afresh checks it first, and the
        running tuner, should it still fail, is put back as it was (when it can be copied)."""
        if self.tuner is None:
            return
        space = message["search_space"]
        said = search_space_refusal(_build(self._tuner_spec, create_tuner), space)
        if said is not None:
            raise SpaceRefused(said)
        self._take_back_ahead()
        try:
            kept = copy.deepcopy(self.tuner)
        except Exception:   # a tuner holding what cannot be copied (a lock, a process) is not kept
            kept = None
        try:
            self.tuner.update_search_space(space)
        except Exception as error:
            if kept is None:
                raise   # the tuner may be half-changed: the experiment cannot go on with it
            self.tuner = kept
            raise SpaceRefused(f"cannot use this search space ({type(error).__name__}: {error})") from None

    def _cmd_generate(self, message: dict[str, Any]) -> dict[str, Any]:
        """Parameters for each id; stops early with ``no_more`` (never any more) or
        ``waiting`` (none until a running trial reports or ends)."""
        generated: list[dict[str, Any]] = []
        for parameter_id in message["parameter_ids"]:
            try:
                parameters = self._next_parameters(parameter_id)
            except NoMoreTrialError:
                return {"parameters": generated, "no_more": True}
            except NoTrialYetError:
                return {"parameters": generated, "no_more": False, "waiting": True}
            except Exception as error:
                if _is_real_nnis_no_more_trial_error(error):
                    return {"parameters": generated, "no_more": True}
                raise
            entry = {"parameter_id": parameter_id, "parameters": parameters}
            # Custom tuners written for NNI have no checkpoint_source.
            checkpoint_source = getattr(self.tuner, "checkpoint_source", None)
            source = checkpoint_source(parameter_id) if checkpoint_source is not None else None
            if source is not None:
                entry["checkpoint_from"] = source
            generated.append(entry)
        if self._asks_ahead and generated:
            self._next_parameter_id = generated[-1]["parameter_id"] + 1
        return {"parameters": generated, "no_more": False}

    def _next_parameters(self, parameter_id: int) -> dict[str, Any]:
        """The parameters computed ahead if there are any (or what computing them raised),
        else the tuner's answer now."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            return ahead.result()
        return self._generate(parameter_id)

    def _generate(self, parameter_id: int) -> dict[str, Any]:
        """The tuner's parameters for ``parameter_id``. An NNI tuner may implement
        ``generate_multiple_parameters`` alone (NNI asks for either): it is asked for one."""
        if not _implements_only_multiple(type(self.tuner)):
            return self.tuner.generate_parameters(parameter_id)
        generated = self.tuner.generate_multiple_parameters([parameter_id])
        if not generated:
            raise NoMoreTrialError(f"{type(self.tuner).__name__} generated no parameters")
        return generated[0]

    def work_ahead(self) -> None:
        """After a reply went out: compute the next parameters now if the last ``generate``
        was answered in full and the tuner asks ahead (see the module docstring)."""
        parameter_id, self._next_parameter_id = self._next_parameter_id, None
        if parameter_id is None or self._ahead is not None:
            return
        try:
            self._ahead = _Ahead(parameters=self._generate(parameter_id))
        except Exception as error:   # the next generate answers it: no more, or the tuner's failure
            self._ahead = _Ahead(error=error)

    def _take_back_ahead(self) -> None:
        """Give parameters computed ahead back to the tuner: what comes next has to see it."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead.parameters is not None:
            self.tuner.take_back(ahead.parameters)

    def _cmd_report(self, message: dict[str, Any]) -> None:
        if self.tuner is None:
            return
        try:
            self.tuner.receive_trial_result(message["parameter_id"], message["parameters"], message["value"])
        except AlgorithmError as error:
            # One trial's unusable result (say a metric the tuner optimizes is missing) is
            # that trial's fault; the tuner goes on as if it had reported nothing.
            _logger.warning("the tuner cannot use the result of parameter id %s: %s", message["parameter_id"], error)

    def _cmd_trial_end(self, message: dict[str, Any]) -> None:
        # A strategy's trial ends ``assessor_only``: the tuner did not propose it.
        if self.tuner is not None and not message.get("assessor_only", False):
            self.tuner.trial_end(message["parameter_id"], message["success"])
        if self.assessor is not None:
            self.assessor.trial_end(message["trial_id"], message["success"])

    def _cmd_assess(self, message: dict[str, Any]) -> dict[str, Any]:
        if self.assessor is None:
            return {"decision": AssessResult.Good.name}
        result = self.assessor.assess_trial(message["trial_id"], message["history"])
        if result is None:
            return {"decision": AssessResult.Good.name}
        # A real NNI's AssessResult is another enum of the same values.
        return {"decision": AssessResult(getattr(result, "value", result)).name}

    def _cmd_import_data(self, message: dict[str, Any]) -> None:
        if self.tuner is not None:
            self._take_back_ahead()
            self.tuner.import_data(message["data"])


def _implements_only_multiple(tuner_class: type) -> bool:
    """Whether a tuner class overrides ``generate_multiple_parameters`` but not
    ``generate_parameters`` of its base (expmgr's ``Tuner``, or a real NNI's)."""
    def from_base(name: str) -> bool:
        return getattr(getattr(tuner_class, name, None), "__qualname__", "") == f"Tuner.{name}"
    return from_base("generate_parameters") and not from_base("generate_multiple_parameters")


def _is_real_nnis_no_more_trial_error(error: Exception) -> bool:
    """Whether ``error`` is a real NNI's ``nni.NoMoreTrialError`` (a custom tuner's "no more"
    when NNI is installed here; the light ``nni``'s is expmgr's own)."""
    nni = sys.modules.get("nni")
    real = getattr(nni, "NoMoreTrialError", None) if nni is not None else None
    return isinstance(real, type) and isinstance(error, real)


def serve(channel_in: BinaryIO, channel_out: BinaryIO) -> int:
    """Answer requests until the channel closes (0) or a handler fails (1)."""
    host = DispatcherHost()
    while True:
        try:
            message = read_frame(channel_in)
        except ProtocolError as error:
            _refuse(channel_out, None, error)
            continue
        if message is None:
            _logger.info("command channel closed; exiting")
            return 0
        try:
            reply = host.handle(message)
        except (ProtocolError, SpaceRefused) as error:
            _refuse(channel_out, message.get("id"), error)
            continue
        except Exception:  # any failure of user or tuner code ends the experiment
            details = traceback.format_exc()
            _logger.error("command %r failed:\n%s", message.get("cmd"), details)
            write_frame(channel_out, {"id": message.get("id"), "error": details})
            return 1
        if message.get("reply", True):
            reply["id"] = message.get("id")
            try:
                write_frame(channel_out, reply)
            except FrameTooLarge as error:
                _refuse(channel_out, message.get("id"), error)
        host.work_ahead()  # while the manager starts the trial it was given


def _refuse(channel_out: BinaryIO, request_id: Any, error: ProtocolError | SpaceRefused) -> None:
    """Answer a frame that could not be used; nothing changed, so the dispatcher goes on."""
    _logger.error("refused a command (id %s): %s", request_id, error)
    write_frame(channel_out, {"id": request_id, "error": str(error), "fatal": False})
