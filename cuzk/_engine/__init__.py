"""The proving engine (DESIGN §4): resident keys, a priority queue of partitions, N workers per
device behind a selectable interlock, byte budgets, and a timeline with its exports."""
from ._engine import (PRIORITIES, Engine, EngineBusy, EngineClosed, EngineError, EngineKey,
                      JobFuture, priority_arg)
from ._interlock import LOCK_MODES, PLANS, Interlock, PriorityLock, lock_mode_arg
from ._timeline import Timeline

__all__ = ["Engine", "EngineKey", "JobFuture", "EngineError", "EngineBusy", "EngineClosed",
           "PRIORITIES", "priority_arg", "LOCK_MODES", "PLANS", "Interlock", "PriorityLock",
           "lock_mode_arg", "Timeline"]
