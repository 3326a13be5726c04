"""What a process's exit status says, when a log line reports one: the signal that ended it.

sglang reports its children's ends with `multiprocessing.Process.exitcode` (`Subprocess
scheduler_0 (pid=…) crashed with exit code -9`, `Scheduler or DataParallelController … terminated
with -9`) and with `subprocess.Popen.returncode`; both give a process ended by signal N as -N
(Python's documentation of both attributes). A shell, and a container runtime for its main
process, give it as 128+N (`137`). A positive code below 128 is whatever the process passed to
`exit()`, which says nothing general, so it gets no answer here.

The signals are Linux's numbering (x86 and ARM alike), a closed vocabulary; what each means for
an sglang process is what the line alone cannot say: SIGKILL cannot be caught, so a process
killed by it prints nothing (in practice the kernel's OOM killer or a container's memory limit:
gpustack/gpustack#3848 and sglang#15235, a FLUX load killed with -9; dagster-io/dagster#11570);
SIGSEGV and SIGABRT come from native code, which prints its own lines before (`Fatal Python
error: Segmentation fault` from faulthandler, `terminate called after throwing an instance of
…`); SIGBUS is most often shared memory that ran out (odysseus-dev/odysseus#6259, docker's
64 MB `/dev/shm`; sgl-project/sgl-project.github.io#5 on `--shm-size`). The records that capture
a status name the capture `exit_code`, `exitcode` or `returncode`
(`matcher.pipeline.vocabulary_answered` applies this to every event that has one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from matcher.catalog.answer import Said, answered_by

CAPTURES = ("exit_code", "exitcode", "returncode", "return_code")

_OOM_KILL = (
    "The process was killed with SIGKILL, which it cannot catch or log: in practice the "
    "kernel's OOM killer, or a container or pod memory limit, when the host RAM it used (model "
    "weights read before they go to the GPU, pinned buffers, shared memory) passed what it may "
    "use. Confirm with `dmesg -T | grep -i -E 'killed process|out of memory'` on the host, "
    "`kubectl describe pod` (Last State: OOMKilled) or `docker inspect -f "
    "'{{.State.OOMKilled}}' <container>`; then raise the memory limit (docker `--memory`, "
    "Kubernetes `resources.limits.memory`) or stop what else uses the host's memory. With no "
    "OOM kill recorded, something sent SIGKILL on purpose: `kill -9`, or a supervisor that "
    "stopped the container after its grace period (Kubernetes `terminationGracePeriodSeconds`)")

_NATIVE = (
    "It crashed in native code (NCCL, the CUDA driver, a compiled extension), not in Python: the "
    "lines printed just before it name the library — `Fatal Python error: Segmentation fault` "
    "and the thread stacks faulthandler prints, `terminate called after throwing an instance of "
    "…` and its `what():`. Act on that line; with none, start the server again with "
    "`PYTHONFAULTHANDLER=1` (and the same arguments) to have the stacks printed")


@dataclass(frozen=True, slots=True)
class Signal:
    number: int
    name: str
    meaning: str
    what_to_do: str | None = None


SIGNALS: dict[int, Signal] = {s.number: s for s in (
    Signal(1, "SIGHUP", "its terminal or session went away",
           "The terminal or SSH session that started the server closed: start it under "
           "`nohup`, `tmux`/`screen`, systemd or a container so it outlives the session"),
    Signal(2, "SIGINT", "interrupted (Ctrl-C)", None),
    Signal(3, "SIGQUIT", "sent SIGQUIT", None),
    Signal(4, "SIGILL", "an illegal CPU instruction",
           "A compiled library uses CPU instructions this machine's CPU lacks (a wheel built "
           "for a newer CPU, e.g. with AVX-512): install the build made for this CPU, or build "
           "it here"),
    Signal(6, "SIGABRT", "aborted by native code",
           "Native code called abort(): a C++ exception nothing caught (`terminate called after "
           "throwing an instance of …`, e.g. NCCL's watchdog after a collective timed out) or a "
           "failed C assertion; the lines just before this one say which — act on them"),
    Signal(7, "SIGBUS", "a bus error (memory it mapped could not be backed)",
           "Memory the process had mapped could not be backed: most often shared memory "
           "(`/dev/shm`) ran out in a container (docker's default is 64 MB: start it with "
           "`--shm-size` of several GB or `--ipc=host`; in Kubernetes mount an `emptyDir` with "
           "`medium: Memory` at /dev/shm), or a memory-mapped file (weights) was truncated or "
           "changed while in use"),
    Signal(8, "SIGFPE", "an arithmetic error in native code (e.g. an integer division by zero)",
           _NATIVE),
    Signal(9, "SIGKILL", "killed (SIGKILL)", _OOM_KILL),
    Signal(11, "SIGSEGV", "a segmentation fault", _NATIVE),
    Signal(13, "SIGPIPE", "it wrote to a pipe or socket nobody reads any more",
           "The process on the other end of its pipe or socket had gone: that process's own "
           "error (earlier in the log) is the failure"),
    Signal(14, "SIGALRM", "an alarm timer", None),
    Signal(15, "SIGTERM", "asked to stop (SIGTERM)",
           "Something asked it to stop: a supervisor (Kubernetes deleting or evicting the pod "
           "— `kubectl describe pod` and `kubectl get events` say why —, `docker stop`, systemd) "
           "or a person; it is no crash of sglang's"),
    Signal(24, "SIGXCPU", "its CPU-time limit (`ulimit -t`) ran out",
           "Its CPU-time limit ran out: raise or remove `ulimit -t` (or the batch system's "
           "CPU-time limit) for the server"),
    Signal(25, "SIGXFSZ", "its file-size limit (`ulimit -f`) was exceeded",
           "A file it wrote passed the file-size limit: raise or remove `ulimit -f`"),
)}

_NAMES = {10: "SIGUSR1", 12: "SIGUSR2", 16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT",
          19: "SIGSTOP", 20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG",
          26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS"}

_INTEGER = re.compile(r"\s*(-?\d{1,4})\s*[.;,]?\s*$")


def signal_of(status: str) -> tuple[int, str] | None:
    """(the signal number, how the status gives it) of an exit status that says a signal ended
    the process: -N from Python, 128+N from a shell or container runtime; None otherwise."""
    m = _INTEGER.match(status)
    if m is None:
        return None
    code = int(m[1])
    if -64 <= code <= -1:
        return -code, f"{code} (Python's way of saying signal {-code} ended it)"
    if 129 <= code <= 128 + 64:
        return code - 128, (f"{code} (128+{code - 128}: a shell's or container runtime's way "
                            f"of saying signal {code - 128} ended it)")
    return None


def answer(status: str) -> tuple[str, str | None] | None:
    """(what the status says, what to do about it or None) for an exit status a signal ended;
    None for any other status."""
    found = signal_of(status)
    if found is None:
        return None
    number, how = found
    sig = SIGNALS.get(number)
    if sig is None:
        name = _NAMES.get(number, f"signal {number}")
        return f"Exit status {how}: {name}.", None
    return f"Exit status {how}: {sig.name}, {sig.meaning}.", sig.what_to_do


def status_in(captures: dict[str, str]) -> str | None:
    for name in CAPTURES:
        value = captures.get(name)
        if value is not None:
            return value
    return None



def said(captures: dict[str, str]) -> Said:
    status = status_in(captures)
    return answer(status) if status is not None else None


remediation = answered_by(said)  # what a signal's exit status says ahead of the record's words
