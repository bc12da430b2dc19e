"""An abstract model of the lock + budget protocol, explored exhaustively for deadlocks.

Each worker runs ``rounds`` partitions, each one the step sequence of a plan
(``_interlock.PLANS``, the very tuples the engine executes).  Step semantics:

* ``("acquire", L)``: enabled when no other worker holds ``L``; ``("release", L)``: always.
* ``("stage", "upload")`` (or ``"prepare"`` in hand-written protocols that reserve there):
  reserves ``units`` of the budget; enabled only when they fit (the
  real ``Budget.reserve(block=True)`` waits); a reservation larger than the whole budget fails
  at once (the abort path).  ``("stage", "finish")`` frees the partition's units.
  ``("reserve", k)`` / ``("free",)`` express other protocols (for the negative tests).
* ``("gate", "host")`` (``_interlock.gated_plan``): enabled unless another worker is host-busy
  (past its gate, its upload not yet done) while no worker is in a region (run done, sync not
  yet).  Host-busy here also covers a two-lock worker's wait for the memory lock, which the
  engine does not count: the model's gate blocks at least as often as the engine's.
* with ``failures=True`` every stage step may also fail: the worker aborts (frees its units,
  releases its locks, as the engine's abort path does) and starts its next round.
* ``("stage", "early_head")`` (``_interlock.EARLY_PLANS``): when another worker holds budget
  units, or its units do not fit now (early_head never waits), the worker releases its locks
  and runs its ``fallbacks`` plan from the start (the engine's fallback); else it reserves.  A
  worker whose plan is an early plan tries it every round (the engine only on an idle device:
  the model covers more interleavings than the engine produces).  For the gate it is host-busy
  right before early_head (the engine counts the call itself).

:func:`explore` visits every reachable state (depth-first, memoised) and reports the first
state where some worker is unfinished and no worker can move (a deadlock), or a final state
that still holds a lock or budget units (a leak), with the step trace that reaches it.
"""
from dataclasses import dataclass, field

__all__ = ["ModelResult", "explore"]


@dataclass
class ModelResult:
    """``states`` visited; ``deadlock``/``leak``: None, or the trace reaching one."""
    states: int
    deadlock: list = None
    leak: list = None
    finals: int = 0
    detail: str = ""
    notes: list = field(default_factory=list)

    @property
    def ok(self):
        return self.deadlock is None and self.leak is None


def _reserving_stage(plan):
    """The stage that reserves a partition's budget: ``upload`` where the plan has one (the
    engine's plans), ``early_head`` in an early plan, else ``prepare`` (hand-written protocols
    of the tests)."""
    for name in ("upload", "early_head"):
        if ("stage", name) in plan:
            return name
    return "prepare"


def _effects(step, units, reserve_at="upload"):
    """(reserve units, frees?, can fail?) of one step."""
    kind = step[0]
    if kind == "stage":
        name = step[1]
        if name == reserve_at:
            return units, False, True
        if name == "finish":
            return 0, True, True
        return 0, False, True
    if kind == "reserve":
        return int(step[1]), False, True
    if kind == "free":
        return 0, True, False
    return 0, False, False


def explore(plans, budget, units=1, rounds=2, key_units=0, failures=False, max_states=2_000_000,
            fallbacks=None):
    """Explore every interleaving of the workers' plans.

    Parameters
    ----------
    plans : sequence of plan tuples
        One per worker (pass the same plan several times for identical workers).
    budget : int
        Budget size in units (``None`` = unlimited).
    units : int
        Units one partition's ``prepare`` reserves.
    rounds : int
        Partitions per worker.
    key_units : int
        Units reserved up front for the resident key.
    failures : bool
        Also explore a failure at every stage step.
    fallbacks : sequence of plan tuples or None
        Per worker, the plan an early plan's ``early_head`` falls back to (None: no early plan).

    Returns
    -------
    ModelResult
    """
    nw = len(plans)
    fallbacks = [None] * nw if fallbacks is None else list(fallbacks)
    # alts[i][a]: worker i's plan a (0: its plan, 1: its fallback)
    alts = [(tuple(p), tuple(f) if f is not None else None) for p, f in zip(plans, fallbacks)]
    reserve_at = [tuple(_reserving_stage(p) if p is not None else None for p in a) for a in alts]
    total = float("inf") if budget is None else int(budget)
    # worker state: (round, pc, reserved units, held locks as a sorted tuple, plan 0/1)
    start = tuple((0, 0, 0, (), 0) for _ in range(nw))
    seen = {start}
    stack = [(start, ())]
    result = ModelResult(states=0)

    def used(state):
        return key_units + sum(w[2] for w in state)

    def index(p, step):
        return p.index(step) if p is not None and step in p else None

    gates = [tuple(index(p, ("gate", "host")) for p in a) for a in alts]
    uploads = [tuple(index(p, ("stage", "upload")) for p in a) for a in alts]
    heads = [tuple(index(p, ("stage", "early_head")) for p in a) for a in alts]

    def host_busy(j, w):
        a = w[4]
        g, u, e = gates[j][a], uploads[j][a], heads[j][a]
        if w[0] >= rounds:
            return False
        return (g is not None and u is not None and g < w[1] <= u) or (e is not None and w[1] == e)

    def in_region(j, w):
        return w[0] < rounds and alts[j][w[4]][w[1]] == ("stage", "sync")

    def gate_open(state, i):
        return (not any(host_busy(j, w) for j, w in enumerate(state) if j != i)
                or any(in_region(j, w) for j, w in enumerate(state)))

    def owner(state, lock):
        for i, w in enumerate(state):
            if lock in w[3]:
                return i
        return None

    while stack:
        state, trace = stack.pop()
        result.states += 1
        if result.states > max_states:
            raise RuntimeError(f"model: more than {max_states} states")
        succ = []
        for i, (rnd, pc, res, held, alt) in enumerate(state):
            if rnd >= rounds:
                continue
            plan = alts[i][alt]
            step = plan[pc]
            nxt_pc, nxt_rnd, nxt_alt = pc + 1, rnd, alt
            if nxt_pc == len(plan):
                nxt_pc, nxt_rnd, nxt_alt = 0, rnd + 1, 0
            kind = step[0]
            want, frees, can_fail = _effects(step, units, reserve_at[i][alt])
            new = None
            if step == ("stage", "early_head") and (any(w[2] for j, w in enumerate(state) if j != i)
                                                    or used(state) + want > total):
                # another partition holds units, or the units do not fit now (early_head never
                # waits): locks released, the fallback plan from its start
                succ.append((i, ("fallback",) + step, (rnd, 0, 0, (), 1)))
                if failures:
                    succ.append((i, ("fail",) + step, (rnd + 1, 0, 0, (), 0)))
                continue
            if kind == "acquire":
                if owner(state, step[1]) is None:
                    new = (nxt_rnd, nxt_pc, res, tuple(sorted(held + (step[1],))), nxt_alt)
            elif kind == "release":
                new = (nxt_rnd, nxt_pc, res, tuple(h for h in held if h != step[1]), nxt_alt)
            elif kind == "gate":
                if gate_open(state, i):
                    new = (nxt_rnd, nxt_pc, res, held, nxt_alt)
            elif want:
                if key_units + want > total:
                    can_fail = True              # BudgetError at once: only the abort path
                elif used(state) + want <= total:
                    new = (nxt_rnd, nxt_pc, res + want, held, nxt_alt)
            elif frees:
                new = (nxt_rnd, nxt_pc, 0, held, nxt_alt)
            else:
                new = (nxt_rnd, nxt_pc, res, held, nxt_alt)
            if new is not None:
                succ.append((i, step, new))
            if (failures and can_fail) or (want and key_units + want > total):
                succ.append((i, ("fail",) + step, (rnd + 1, 0, 0, (), 0)))
        if not succ:
            if any(w[0] < rounds for w in state):
                result.deadlock = list(trace)
                result.detail = _describe(state, alts, used(state), budget)
                return result
            result.finals += 1
            if used(state) != key_units or any(w[3] for w in state):
                result.leak = list(trace)
                result.detail = _describe(state, alts, used(state), budget)
                return result
            continue
        for i, step, new in succ:
            nstate = state[:i] + (new,) + state[i + 1:]
            if nstate not in seen:
                seen.add(nstate)
                stack.append((nstate, trace + ((i, step),)))
    return result


def _describe(state, plans, used, budget):
    lines = [f"budget {used}/{budget}"]
    for i, (rnd, pc, res, held, alt) in enumerate(state):
        at = plans[i][alt][pc] if pc < len(plans[i][alt]) else None
        if rnd >= 0 and at is not None and res == 0 and not held and pc == 0:
            at = at  # idle between partitions
        lines.append(f"worker {i}: round {rnd}, next {at}, reserved {res}, holds {list(held)}")
    return "; ".join(lines)
