"""The block VM's two roles (block/roles.py): the producer and the consumer run as coroutines.

Each role runs in a Python thread, but only one runs at a time and the hand-over points are
fixed, so a run is deterministic: the producer starts; a role runs until an `mbarrier_wait`
whose phase has not completed (`RoleScheduler.block`), then the other role runs; an
`mbarrier_arrive` that completes the phase the other role waits for hands over at once
(`wake`: the earliest point a real producer could refill the stage). A wait that
neither role can complete (both blocked, or the other role finished) is TC603 at the wait's
line: on the GPU it would hang. Each role has its own scalar environment (its loop variables);
tensors, barriers and copies are the block's. When a role raises, the other is unwound and the
error reaches the caller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tilecraft.diagnostics import TilecraftError, current_span

from .roles import WarpRoles
from .vm import BlockVM, ExitBlock


class _Unwind(BaseException):
    """Stops a role whose partner failed (not an error of its own)."""


class RoleScheduler:
    """Whose turn it is, what a blocked role waits for, and the first error."""

    def __init__(self, vm: BlockVM, producer_threads: int):
        self.vm = vm
        self.producer_threads = producer_threads
        self.cv = threading.Condition()
        self.turn = "producer"
        self.done: set[str] = set()
        self.waiting: dict[str, Callable[[], bool]] = {}
        self.what: dict[str, str] = {}  # what a blocked role waits for, and at which line
        self.env: dict[str, dict] = {}
        self.error: BaseException | None = None

    def other(self, role: str) -> str:
        return "consumer" if role == "producer" else "producer"

    def role(self) -> str:
        return threading.current_thread().name.rsplit("-", 1)[-1]

    def block(self, ready: Callable[[], bool], what: str) -> None:
        """Wait (the calling role) until `ready()`, letting the other role run meanwhile; TC603
        when no role can make progress."""
        me = self.role()
        other = self.other(me)
        while not ready():
            theirs = self.waiting.get(other)
            if other in self.done or (theirs is not None and not theirs()):
                stuck = "has finished" if other in self.done else \
                    f"waits for {self.what[other]}"
                raise TilecraftError("TC603", instr="mbarrier_wait",
                                     detail=f"the {me} role waits for {what}, the {other} role "
                                     f"{stuck}: no role can go on (this would hang the GPU)")
            span = current_span()
            self.what[me] = what + (f" (line {span.line})" if span is not None else "")
            self.waiting[me] = ready
            self._switch(me, other)
            self.waiting.pop(me, None)

    def wake(self) -> None:
        """An arrival completed a phase: when the other role waits for it, it runs now (so a
        stage released too early is overwritten before its reader is done, and the VM sees
        it: TC605, TC611)."""
        me = self.role()
        other = self.other(me)
        theirs = self.waiting.get(other)
        if other not in self.done and theirs is not None and theirs():
            self._switch(me, other)

    def _switch(self, me: str, to: str) -> None:
        with self.cv:
            self.env[me] = self.vm.env
            self.turn = to
            self.cv.notify_all()
            self.cv.wait_for(lambda: self.turn == me)
            self.vm.env = self.env[me]
            if self.error is not None:
                raise _Unwind

    def _run(self, role: str, body) -> None:
        with self.cv:
            self.cv.wait_for(lambda: self.turn == role)
            self.vm.env = self.env[role]
        try:
            self.vm.exec(body)
        except ExitBlock:
            pass
        except _Unwind:
            pass
        except BaseException as err:  # (handed to the caller's thread)
            if self.error is None:
                self.error = err
        finally:
            with self.cv:
                self.done.add(role)
                self.env[role] = self.vm.env
                self.turn = self.other(role) if self.other(role) not in self.done else "main"
                self.cv.notify_all()


def run_roles(vm: BlockVM, s: WarpRoles) -> None:
    """Run both roles of `s` to the end (module docstring)."""
    sched = RoleScheduler(vm, s.producer_threads)
    outer = vm.env
    sched.env = {"producer": dict(outer), "consumer": dict(outer)}
    vm.roles = sched
    threads = [threading.Thread(target=sched._run, args=(role, body), name=f"tc-role-{role}",
                                daemon=True)
               for role, body in (("producer", s.producer), ("consumer", s.consumer))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        vm.roles = None
        vm.env = outer
    if sched.error is not None:
        raise sched.error


__all__ = ["RoleScheduler", "run_roles"]
