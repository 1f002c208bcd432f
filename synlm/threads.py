"""How many threads torch uses in a ``synlm`` command: one per idle core (docs/training.md,
"Threads on a shared or small machine").

torch starts as many threads as the machine has cores. On a machine where other processes
already keep cores busy, those threads wait on each other and a run becomes many times
slower than with one thread (measured: 770 s against 20.6 s for two quickstarts side by
side). So unless the user chose (``SYNLM_THREADS``, or ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``,
which torch reads itself), each command takes the cores it may run on minus those busy
right now: the larger of the one-minute load average and the busy share of the CPU time
over a tenth of a second (``/proc/stat``, where there is one), rounded; at least one.
"""

from __future__ import annotations

import os
import time

from synlm.errors import InputError

THREADS_ENV = "SYNLM_THREADS"
#: Variables that say the user chose a thread count; synlm then leaves torch alone.
CHOSEN = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def usable_cores() -> int:
    """The cores this process may run on (its affinity), else the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs from ``/proc/stat``; None where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_cores(cores: int, interval: float = 0.1) -> float:
    """How many cores other work keeps busy: the larger of the one-minute load average and
    the busy share of all CPU time over ``interval`` seconds (this process sleeps then)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    before = _cpu_times()
    if before is None:
        return load
    time.sleep(interval)
    after = _cpu_times()
    if after is None or after[1] == before[1]:
        return load
    return max(load, (after[0] - before[0]) / (after[1] - before[1]) * cores)


def pick_threads(cores: int, busy: float) -> int:
    """One thread per idle core: ``cores`` minus the busy ones, rounded, at least one."""
    return max(1, min(cores, cores - round(busy)))


def configure_threads(environ: dict[str, str] | os._Environ[str] = os.environ
                      ) -> tuple[int, str]:
    """Set torch's thread count for this command; returns it and why (for the run's log).
    ``SYNLM_THREADS=N`` sets N; ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` leave torch as they
    made it; otherwise ``pick_threads`` of the usable and busy cores. A bad ``SYNLM_THREADS``
    is a one-line ``InputError`` (a ``ValueError``)."""
    import torch  # here: a bad SYNLM_THREADS is reported before torch's second of import

    if environ.get(THREADS_ENV):
        value = environ[THREADS_ENV]
        if not value.isdigit() or int(value) < 1:
            raise InputError(f"{THREADS_ENV}={value!r}: expected a whole number of threads, "
                             "at least 1")
        torch.set_num_threads(int(value))
        return int(value), f"{THREADS_ENV}={value}"
    chosen = [name for name in CHOSEN if environ.get(name)]
    if chosen:
        return torch.get_num_threads(), f"{chosen[0]}={environ[chosen[0]]}"
    cores = usable_cores()
    busy = busy_cores(cores)
    threads = pick_threads(cores, busy)
    torch.set_num_threads(threads)
    return threads, f"{busy:.1f} of {cores} cores busy"
