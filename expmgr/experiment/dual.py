"""A method with one name and two forms, one called on the class and one on an instance:
``Experiment.resume(exp_id, port)`` (expmgr's, and NNI's older form) beside NNI 3.0's
``Experiment(None, exp_id).resume(port)``::

    class Experiment:
        def _resume_by_id(cls, exp_id, port=8080): ...
        def _resume(self, port=8080): ...
        resume = class_or_instance(_resume_by_id, _resume)
"""
from __future__ import annotations

import types
from typing import Any, Callable, Concatenate, Generic, ParamSpec, TypeVar, overload

ClassArgs = ParamSpec("ClassArgs")
ClassResult = TypeVar("ClassResult")
InstanceArgs = ParamSpec("InstanceArgs")
InstanceResult = TypeVar("InstanceResult")


class class_or_instance(Generic[ClassArgs, ClassResult, InstanceArgs, InstanceResult]):  # noqa: N801 - a method's kind
    """A descriptor: ``on_class`` bound to the class when looked up on the class,
    ``on_instance`` bound to the instance when looked up on one."""

    def __init__(self, on_class: Callable[Concatenate[Any, ClassArgs], ClassResult],
                 on_instance: Callable[Concatenate[Any, InstanceArgs], InstanceResult]) -> None:
        self.on_class = on_class
        self.on_instance = on_instance
        self.__doc__ = on_instance.__doc__

    @overload
    def __get__(self, instance: None, owner: type) -> Callable[ClassArgs, ClassResult]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Callable[InstanceArgs, InstanceResult]: ...

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return types.MethodType(self.on_class, owner)
        return types.MethodType(self.on_instance, instance)
