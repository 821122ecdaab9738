"""Where a Spark driver's CPU went, by kind of thread and process, read from /proc.

Row [9] prints it next to its times, so that a result below its goal shows its reason:
the JVM's JIT compiler threads, its garbage collector and VM thread, the threads that run
Spark's tasks, the rest of the JVM, the Python workers the JVM starts (pyspark's daemon
and its forked workers, the exited ones included through the daemon's ``cutime``) and the
driver's own Python process. pyspark's own daemon ignores ``SIGCHLD``, which makes the
kernel drop its exited workers' CPU: the bench starts ``spark.worker_daemon``
instead, which reaps them and so keeps their CPU in its ``cutime``.

A thread's name in ``/proc/PID/task/TID/comm`` is its Java name cut at 15 bytes:
``C2 CompilerThre``, ``C1 CompilerThre``, ``GC Thread#0``, ``VM Thread``,
``Executor task l`` (``Executor task launch worker for task N``). CPU of threads that
ended before the sample is only in the process's total: it is counted under "other JVM".

Row [11] reads the CPU of the ZooKeeper server it runs against the same way, when that
server is a local process: ``listener_pid`` finds it by its listening port,
``process_cpu_seconds`` reads its CPU time.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Final

__all__ = [
    "CPU_KINDS",
    "descendants",
    "listener_pid",
    "process_cpu_seconds",
    "spark_cpu_seconds",
]

CPU_KINDS: Final = (
    "JIT compiler",
    "GC + VM thread",
    "tasks",
    "other JVM",
    "Python workers",
    "driver Python",
)
"""The kinds ``spark_cpu_seconds`` reports, in the order the bench prints them."""

_TICKS: Final = os.sysconf("SC_CLK_TCK")


def _stat_fields(path: Path) -> list[str] | None:
    """The fields of a /proc stat file after the command name (field 3 onwards)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _cpu(path: Path, *, children: bool = False) -> float:
    """utime + stime (and, with ``children``, the reaped children's) in seconds."""
    fields = _stat_fields(path)
    if fields is None:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / _TICKS


def _comm(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _thread_kind(name: str) -> str:
    if "CompilerThre" in name:
        return "JIT compiler"
    if name.startswith(("GC ", "G1 ", "VM Thread")):
        return "GC + VM thread"
    if name.startswith("Executor task"):
        return "tasks"
    return "other JVM"


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid``, from /proc."""
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(Path(entry.path, "stat"))
            if fields is not None:
                tree.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], list(tree.get(pid, ()))
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(tree.get(current, ()))
    return found


def spark_cpu_seconds(driver: int | None = None) -> dict[str, float]:
    """The CPU seconds so far of the Spark session this process (``driver``) started,
    by ``CPU_KINDS``. The JVM is the descendant process named ``java``; the Python
    workers are its descendants."""
    driver = os.getpid() if driver is None else driver
    usage = resource.getrusage(resource.RUSAGE_SELF)
    seconds = dict.fromkeys(CPU_KINDS, 0.0)
    seconds["driver Python"] = usage.ru_utime + usage.ru_stime
    for pid in descendants(driver):
        if _comm(Path(f"/proc/{pid}/comm")) != "java":
            continue
        total = _cpu(Path(f"/proc/{pid}/stat"))
        threads = 0.0
        for task in os.scandir(f"/proc/{pid}/task"):
            kind = _thread_kind(_comm(Path(task.path, "comm")))
            if kind != "other JVM":
                spent = _cpu(Path(task.path, "stat"))
                seconds[kind] += spent
                threads += spent
        seconds["other JVM"] += max(0.0, total - threads)
        for worker in descendants(pid):
            seconds["Python workers"] += _cpu(Path(f"/proc/{worker}/stat"), children=True)
    return seconds


_LISTEN: Final = "0A"  # TCP_LISTEN in /proc/net/tcp's "st" column


def listener_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` of this machine (``/proc/net/tcp`` and
    ``tcp6``, then the sockets among each process's descriptors), or None when no
    listener is seen or its process cannot be read (another user's, without the rights)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local address "HEX_IP:HEX_PORT", state, ..., inode (field 10)
            listening = len(fields) > 9 and fields[3] == _LISTEN
            if listening and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    with os.scandir("/proc") as processes:
        for entry in processes:
            if entry.name.isdigit() and _holds_any(entry.name, inodes):
                return int(entry.name)
    return None


def _holds_any(pid: str, sockets: set[str]) -> bool:
    """Whether process ``pid`` has a descriptor on one of ``sockets`` (``socket:[N]``)."""
    try:
        descriptors = os.scandir(f"/proc/{pid}/fd")
    except OSError:
        return False
    with descriptors:
        for fd in descriptors:
            try:
                if os.readlink(fd.path) in sockets:
                    return True
            except OSError:
                continue
    return False


def process_cpu_seconds(pid: int) -> float | None:
    """The CPU seconds (user and system, all threads) process ``pid`` has used so far, or
    None once it is gone."""
    fields = _stat_fields(Path(f"/proc/{pid}/stat"))
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS
