"""How many threads torch uses in a ``synlm`` command (docs/training.md, "Threads").

torch starts as many threads as the machine has cores; on a machine that other work keeps
busy, threads on its cores wait for each other. So unless the user chose (``SYNLM_THREADS``,
or ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``, which torch reads itself), each command takes
one thread per idle core at its start (``idle_cores``): the cores this process may use (its
CPU affinity, capped by its cgroup's CPU quota, rounded up) less the cores other work keeps
busy (``busy_cores``: the larger of the one-minute load average, scaled to the share of the
machine's cores these are, and the busy share of these cores' CPU time over a tenth of a
second, from ``/proc/stat`` where there is one), rounded, at least one. At the quickstart's
size the count does not move the numbers: its weights are bit-identical with one and two
threads (tests/test_threads.py; the operators torch runs in parallel there, MKL's GEMMs,
dropout's draws that skip ahead in one random stream, the embedding's backward, split their
work without changing the order of any sum). MKL's GEMMs do so in its strict reproducibility
mode (``sum_alike``: ``MKL_CBWR=AUTO,STRICT`` unless the user set it, before the first
product; without it, on a CPU with AVX-512, one thread and two give other sums). A sum of
more than 32,768 values to one number adds each thread's share apart, so a loss's value,
never its gradient, may differ in its last bit. Other operators promise the same sums only
for a fixed count, so more threads, another CPU or another model may differ: a fit that
continues a checkpoint (``fit --ckpt_path``) still goes on with the count the checkpoint
recorded (``Threads.resume``), to continue exactly as it ran.

Threads that wait for each other sleep at once (``wait_passively``: ``OMP_WAIT_POLICY=
PASSIVE`` unless the user set it, before torch loads OpenMP). OpenMP's default spins first,
and a spinning thread holds the core that a thread sharing it with other work needs to
finish its share; on a busy machine every parallel operator then waits for it
(benchmarks/threads_hog.py measures the difference).
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import NamedTuple, TextIO

from synlm.errors import InputError

THREADS_ENV = "SYNLM_THREADS"
#: OpenMP's wait policy (``PASSIVE``: a waiting thread sleeps at once; unset: it spins a
#: while first), read once, when torch loads its OpenMP runtime.
WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
#: MKL's conditional numerical reproducibility: ``AUTO,STRICT`` makes its GEMMs' sums the
#: same whatever the thread count (for one instruction set), read at its first call.
SUMS_ENV = "MKL_CBWR"
SUMS_ALIKE = "AUTO,STRICT"
#: Variables that say the user chose a thread count; synlm then leaves torch alone.
CHOSEN = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: Where the cgroup file systems are mounted (v2: one tree; v1: one per controller).
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: This process's cgroup in each hierarchy (``ID:CONTROLLERS:/PATH`` lines).
OWN_CGROUP = Path("/proc/self/cgroup")
#: The folders of cgroup v1's ``cpu`` controller, as distributions mount it.
V1_CPU = ("cpu", "cpu,cpuacct", "cpuacct,cpu")
#: The CPU times of the machine (``cpu``) and of each CPU (``cpuN``), in jiffies.
PROC_STAT = Path("/proc/stat")
RECORDED_WHY = "recorded in the checkpoint"


def _plural(count: int | float, noun: str) -> str:
    return f"{count:g} {noun}{'' if count == 1 else 's'}"


def affinity_cores() -> int:
    """The cores this process may run on (its CPU affinity), else the machine's."""
    cpus = affinity_cpus()
    return len(cpus) if cpus is not None else os.cpu_count() or 1


def _own_paths(membership: Path) -> dict[str, str]:
    """This process's cgroup path per hierarchy, from ``membership`` (``/proc/self/cgroup``):
    ``"v2"`` for the unified one, ``"cpu"`` for v1's cpu controller; none where unreadable."""
    paths = {}
    try:
        lines = membership.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return paths
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        if fields[0] == "0" and fields[1] == "":
            paths["v2"] = fields[2]
        elif "cpu" in fields[1].split(","):
            paths["cpu"] = fields[2]
    return paths


def _upwards(base: Path, own: str) -> list[Path]:
    """``base/own`` and each folder above it up to ``base``: a quota on any of them holds."""
    folders = [base]
    for part in (p for p in own.split("/") if p and p not in (".", "..")):
        folders.append(folders[-1] / part)
    return folders[::-1]


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _quota(folder: Path) -> tuple[int, int] | None:
    """The CPU quota set on one cgroup folder as (quota, period) microseconds: v2's
    ``cpu.max`` (``"150000 100000"``; ``"max 100000"`` is none) or v1's
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (a quota of -1 is none)."""
    v2 = _read(folder / "cpu.max")
    if v2 is not None:
        fields = v2.split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            return int(fields[0]), int(fields[1])
        return None
    quota, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
    if quota is not None and period is not None and quota.isdigit() and period.isdigit():
        return int(quota), int(period)
    return None


def cgroup_quota(root: Path = CGROUP_ROOT, membership: Path = OWN_CGROUP
                 ) -> tuple[int, int] | None:
    """The tightest CPU quota on this process's cgroup and those above it, as (quota,
    period) microseconds, in cgroup v2 (``root/cpu.max``) or v1 (``root/cpu/cpu.cfs_*_us``,
    or ``cpu,cpuacct``); None where there is none (``max``, -1, no cgroup files). ``root``
    and ``membership`` (this process's ``/proc/self/cgroup``) are arguments for tests."""
    own = _own_paths(membership)
    bases = [(root, own.get("v2", "/"))]
    bases += [(root / name, own.get("cpu", "/")) for name in V1_CPU if (root / name).is_dir()]
    quotas = [q for base, path in bases for folder in _upwards(base, path)
              if (q := _quota(folder)) is not None and q[0] > 0 and q[1] > 0]
    return min(quotas, key=lambda q: q[0] / q[1], default=None)


def default_threads() -> tuple[int, str]:
    """One thread per core this process may use: min(CPU affinity, ceil(quota / period)),
    at least one; and why, for the log and the run's summary."""
    affinity = affinity_cores()
    quota = cgroup_quota()
    if quota is None:
        return max(1, affinity), f"default: {_plural(affinity, 'core')} in the CPU affinity, " \
            "no cgroup CPU quota"
    limit = max(1, math.ceil(quota[0] / quota[1]))
    cpus = _plural(quota[0] / quota[1], "CPU")
    if limit < affinity:
        return limit, f"default: cgroup CPU quota {quota[0]}/{quota[1]} = {cpus}, " \
            f"{_plural(affinity, 'core')} in the CPU affinity"
    return max(1, affinity), f"default: {_plural(affinity, 'core')} in the CPU affinity, " \
        f"cgroup CPU quota {cpus}"


def affinity_cpus() -> set[int] | None:
    """The CPUs this process may run on (its CPU affinity); None where it cannot tell."""
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None


def _cpu_times(cpus: set[int] | None = None, stat: Path = PROC_STAT
               ) -> tuple[int, int] | None:
    """(busy, total) jiffies of ``cpus`` (their ``cpuN`` lines; None: the machine's ``cpu``
    line) from ``stat`` (``/proc/stat``); None where there is none. Nice time counts as
    busy, idle and iowait as idle."""
    try:
        lines = stat.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    names = {"cpu"} if cpus is None else {f"cpu{n}" for n in cpus}
    busy = total = 0
    for line in lines:
        name, *values = line.split()
        if name in names:
            try:
                fields = [int(v) for v in values]
            except ValueError:
                return None
            idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
            busy, total = busy + sum(fields) - idle, total + sum(fields)
    return (busy, total) if total else None


def busy_cores(cores: int, interval: float = 0.1) -> float:
    """How many of the ``cores`` this process may run on other work keeps busy: the larger
    of the one-minute load average (the machine's, times the share of its cores these are)
    and the busy share of these cores' CPU time over ``interval`` seconds (this process
    sleeps then)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    load *= cores / max(cores, os.cpu_count() or cores)
    cpus = affinity_cpus()
    before = _cpu_times(cpus)
    if before is None:
        return load
    time.sleep(interval)
    after = _cpu_times(cpus)
    if after is None or after[1] == before[1]:
        return load
    return max(load, (after[0] - before[0]) / (after[1] - before[1]) * cores)


def idle_cores(cores: int, busy: float) -> int:
    """``cores`` minus the busy ones, rounded, at least one: the count that waits least on
    the other work (the default, and the one a resume's warning suggests)."""
    return max(1, min(cores, cores - round(busy)))


class Threads(NamedTuple):
    """The thread count a command runs with, why, and what the warnings need."""

    count: int
    why: str
    #: the variable the user chose with (``SYNLM_THREADS``, ``OMP_NUM_THREADS``, ...)
    chosen: str | None = None
    #: cores other work kept busy at the start (measured when nobody chose)
    busy: float | None = None
    #: the cores ``busy`` is counted over (the CPU affinity)
    cores: int = 1
    #: the cores this process may use (``default_threads``), whatever the load
    default: int | None = None
    #: the count the checkpoint a fit continues recorded
    recorded: int | None = None

    def resume(self, recorded: int | None) -> Threads:
        """Continuing a checkpoint that recorded ``recorded`` threads (None: it recorded
        none, or this is no resume): torch goes on with that count, unless the user chose."""
        if recorded is None or recorded < 1:
            return self
        if self.chosen is not None:
            return self._replace(recorded=recorded)
        import torch

        torch.set_num_threads(recorded)
        return self._replace(count=recorded, why=RECORDED_WHY, recorded=recorded)

    def messages(self) -> list[str]:
        """The lines the choice is worth on stderr: a user's choice that differs from the
        checkpoint's, a checkpoint's count above the cores this process may use or above
        the idle ones."""
        lines = []
        if self.chosen is not None and self.recorded not in (None, self.count):
            lines.append(f"synlm: {self.why} gives {_plural(self.count, 'thread')}, the "
                         f"checkpoint's run used {self.recorded}: it may not continue exactly "
                         f"as it ran (without {self.chosen} it goes on with {self.recorded})")
        resumed = self.chosen is None and self.recorded is not None
        if resumed and self.default is not None and self.count > self.default:
            lines.append(f"synlm: the checkpoint's run used {_plural(self.count, 'thread')}, "
                         f"more than the {self.default} this process may use here; it goes "
                         "on with them to continue exactly as it ran (SYNLM_THREADS="
                         f"{self.default} is faster, its numbers may differ slightly)")
        if resumed and self.busy is not None and idle_cores(self.cores, self.busy) < min(
                self.count, self.cores):
            lines.append(f"synlm: warning: {min(self.busy, self.cores):.1f} of {self.cores} "
                         "cores look busy with other work; this run uses "
                         f"{_plural(self.count, 'thread')} anyway, as its checkpoint recorded, "
                         "to continue exactly. SYNLM_THREADS=N chooses N (SYNLM_THREADS="
                         f"{idle_cores(self.cores, self.busy)}, one per idle core, waits less "
                         "on the other work)")
        return lines

    def report(self, file: TextIO | None = None) -> None:
        """Print ``messages`` (on stderr unless ``file``)."""
        for line in self.messages():
            print(line, file=file or sys.stderr, flush=True)


def wait_passively(environ: dict[str, str] | os._Environ[str] = os.environ) -> str | None:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless the user set a policy or torch (hence its
    OpenMP runtime) is loaded already; returns the policy in force (None: OpenMP's default,
    torch having loaded first)."""
    if not environ.get(WAIT_POLICY_ENV) and "torch" not in sys.modules:
        environ[WAIT_POLICY_ENV] = "PASSIVE"
    return environ.get(WAIT_POLICY_ENV) or None


def sum_alike(environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """Set ``MKL_CBWR=AUTO,STRICT`` unless the user set it; returns the setting in force.
    MKL reads it at its first call, so this runs before any matrix product."""
    environ.setdefault(SUMS_ENV, SUMS_ALIKE)
    return environ[SUMS_ENV]


def load_following(busy: float) -> tuple[int, str, int, int]:
    """The default count on a machine where ``busy`` cores look busy: one thread per idle
    core of those this process may use (``default_threads``, ``idle_cores``), at least one;
    and why, the cores it may use and the cores ``busy`` is counted over (the affinity)."""
    limit, why = default_threads()
    cores = affinity_cores()
    count = min(limit, idle_cores(cores, busy))
    return count, f"default: {min(busy, cores):.1f} of {_plural(cores, 'core')} busy with " \
        f"other work, {why.removeprefix('default: ')}", limit, cores


def configure_threads(environ: dict[str, str] | os._Environ[str] = os.environ,
                      warn: bool = True) -> Threads:
    """Set torch's thread count for this command; returns it, why (for the log and the
    summary) and what its warnings need. ``SYNLM_THREADS=N`` sets N;
    ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` leave torch as they made it; otherwise one
    thread per idle core (``load_following``). A command that may continue a checkpoint
    sets the recorded count once it knows (``Threads.resume``) and reports then
    (``Threads.report``; ``warn``: report here). A bad ``SYNLM_THREADS`` is a one-line
    ``InputError`` (a ``ValueError``)."""
    import torch  # here: a bad SYNLM_THREADS is reported before torch's second of import

    if environ.get(THREADS_ENV):
        value = environ[THREADS_ENV]
        if not value.isdigit() or int(value) < 1:
            raise InputError(f"{THREADS_ENV}={value!r}: expected a whole number of threads, "
                             "at least 1")
        torch.set_num_threads(int(value))
        return Threads(int(value), f"{THREADS_ENV}={value}", chosen=THREADS_ENV)
    chosen = [name for name in CHOSEN if environ.get(name)]
    if chosen:
        return Threads(torch.get_num_threads(), f"{chosen[0]}={environ[chosen[0]]}",
                       chosen=chosen[0])
    busy = busy_cores(affinity_cores())
    count, why, limit, cores = load_following(busy)
    threads = Threads(count, why, busy=busy, cores=cores, default=limit)
    torch.set_num_threads(count)
    if warn:
        threads.report()
    return threads
