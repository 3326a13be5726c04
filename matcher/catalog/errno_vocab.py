"""What an operating-system error number means for an sglang server: the answer to Python's
`[Errno N] strerror` (`OSError`, `PermissionError`, `ConnectionRefusedError`, `socket.gaierror`,
and the same text inside the messages of requests, urllib3, aiohttp, uvicorn).

The numbers are Linux's (`errno` in Python, glibc's `strerror`), a closed vocabulary; the
negative ones are `getaddrinfo`'s (`EAI_NONAME` -2, `EAI_AGAIN` -3), which `socket.gaierror`
prints the same way. The line names the number, and the path or address the call was given; it
does not say what to do. What to do follows from what sglang does with the system: it downloads
models into the Hugging Face cache (`HF_HOME`, `~/.cache/huggingface` by default) and reads
them, passes tensors between its processes through shared memory (`/dev/shm`, 64 MB by default
in a docker container), opens a socket per client connection and ports for its server
(`--host`, `--port`) and its processes, and compiles kernels into caches under the home
directory or /tmp. A number with nothing general to say gets its meaning only.

The curated record `os-errno` captures the number as `os_errno`;
`matcher.pipeline.vocabulary_answered` puts this answer ahead of the record's own words.
"""

from __future__ import annotations

from dataclasses import dataclass

from matcher.catalog.answer import Said, answered_by

CAPTURE = "os_errno"

_HF_CACHE = ("Hugging Face downloads go to `HF_HOME` (default `~/.cache/huggingface`), "
             "compiled kernels to `TRITON_CACHE_DIR` and `TORCHINDUCTOR_CACHE_DIR` (under the "
             "home directory and /tmp by default)")
_PEER_DIED = ("when the other end is one of sglang's own processes (a scheduler, the "
              "detokenizer, a prefill or decode server), that process died first: its own error, "
              "earlier in its log, is the failure")


@dataclass(frozen=True, slots=True)
class Errno:
    number: int
    name: str
    text: str  # glibc's strerror
    what_to_do: str | None = None


ERRNOS: dict[int, Errno] = {e.number: e for e in (
    Errno(1, "EPERM", "Operation not permitted"),
    Errno(2, "ENOENT", "No such file or directory",
          "The path the message names does not exist where this process looks: a local "
          "`--model-path` or `--tokenizer-path` must exist inside the container (mount it with "
          "`-v`), a file missing from a model directory means an incomplete download (download "
          "it again); when it names a program (`'nvcc'`, `'gcc'`), install it or put it on PATH"),
    Errno(3, "ESRCH", "No such process"),
    Errno(4, "EINTR", "Interrupted system call"),
    Errno(5, "EIO", "Input/output error",
          "The storage under the path failed (a failing disk, or a network or FUSE filesystem "
          "that dropped): check `dmesg -T` for disk or NFS errors and the mount; copy the model "
          "to a local disk and load it from there"),
    Errno(9, "EBADF", "Bad file descriptor"),
    Errno(11, "EAGAIN", "Resource temporarily unavailable"),
    Errno(12, "ENOMEM", "Cannot allocate memory",
          "The kernel refused the process host memory (RAM, not GPU memory): a fork, a mapping "
          "or a pinned buffer passed the free memory or the container's memory limit. Check "
          "`free -g` and the container or pod memory limit; raise the limit or stop what else "
          "uses the host's memory"),
    Errno(13, "EACCES", "Permission denied",
          "The user the server runs as may not open the path the message names: a cache or "
          "model directory owned by another user (a container running as a non-root user on a "
          "volume written as root, or the reverse). Give that user access (`chown -R` the "
          "directory) or point the writes at a directory it owns: " + _HF_CACHE),
    Errno(16, "EBUSY", "Device or resource busy"),
    Errno(17, "EEXIST", "File exists"),
    Errno(19, "ENODEV", "No such device"),
    Errno(20, "ENOTDIR", "Not a directory"),
    Errno(21, "EISDIR", "Is a directory"),
    Errno(22, "EINVAL", "Invalid argument"),
    Errno(23, "ENFILE", "Too many open files in system",
          "The whole system ran out of open-file handles: raise `sysctl fs.file-max`, or find "
          "the process holding them (`lsof | wc -l`)"),
    Errno(24, "EMFILE", "Too many open files",
          "The process reached its open-file limit (`ulimit -n`; every socket, pipe and file "
          "counts, and a server holds a socket per client connection): raise it where the "
          "server starts (`ulimit -n 65535`, docker `--ulimit nofile=65535:65535`, systemd "
          "`LimitNOFILE=65535`); `cat /proc/<pid>/limits` shows the one in force"),
    Errno(26, "ETXTBSY", "Text file busy"),
    Errno(27, "EFBIG", "File too large"),
    Errno(28, "ENOSPC", "No space left on device",
          "The filesystem of the path the message names is full (`df -h <path>`): model "
          "downloads fill the Hugging Face cache, point `HF_HOME` at a disk with room; "
          "`/dev/shm` holds the shared memory sglang's processes pass tensors through and is "
          "64 MB in a docker container by default: start it with `--shm-size` of several GB "
          "or `--ipc=host` (Kubernetes: an `emptyDir` with `medium: Memory` at /dev/shm); "
          "/tmp holds compile caches (`TMPDIR`, `TRITON_CACHE_DIR`). Free space there or point "
          "the writes at another filesystem"),
    Errno(30, "EROFS", "Read-only file system",
          "The path is on a filesystem mounted read-only (a volume mounted `:ro`, a pod's "
          "read-only root filesystem): mount it writable, or point what writes there at a "
          "writable volume: " + _HF_CACHE + "; `TMPDIR` for the rest"),
    Errno(32, "EPIPE", "Broken pipe",
          "It wrote to a pipe or socket whose other end had closed: " + _PEER_DIED + "; a client "
          "that disconnected before its answer was written only loses that answer"),
    Errno(36, "ENAMETOOLONG", "File name too long"),
    Errno(39, "ENOTEMPTY", "Directory not empty"),
    Errno(71, "EPROTO", "Protocol error"),
    Errno(90, "EMSGSIZE", "Message too long"),
    Errno(95, "EOPNOTSUPP", "Operation not supported"),
    Errno(97, "EAFNOSUPPORT", "Address family not supported by protocol"),
    Errno(98, "EADDRINUSE", "Address already in use",
          "Another process listens on that port (an earlier server still running, or two "
          "servers given the same `--port`): `ss -ltnp | grep :<port>` names it; stop it or give "
          "this one another port"),
    Errno(99, "EADDRNOTAVAIL", "Cannot assign requested address",
          "The address this process was told to listen on or connect from is not one of this "
          "machine's (another machine's address, the host's address seen from inside a "
          "container, or `::1` where IPv6 is off): give `--host 0.0.0.0` or an address "
          "`ip addr` lists here"),
    Errno(100, "ENETDOWN", "Network is down"),
    Errno(101, "ENETUNREACH", "Network is unreachable",
          "There is no route to that address from here (no network in the container, or a "
          "wrong address): check the address and the container's network; for the Hugging "
          "Face Hub without network, download the model beforehand and set "
          "`HF_HUB_OFFLINE=1`"),
    Errno(103, "ECONNABORTED", "Software caused connection abort"),
    Errno(104, "ECONNRESET", "Connection reset by peer",
          "The other end closed the connection abruptly: " + _PEER_DIED + "; else a proxy or "
          "load balancer in between cut it (its idle or request timeout)"),
    Errno(107, "ENOTCONN", "Transport endpoint is not connected"),
    Errno(110, "ETIMEDOUT", "Connection timed out",
          "Nothing answered at that address in time: a firewall drops the traffic, the address "
          "is wrong or the host is down (`nc -vz <host> <port>` from this machine tells); for "
          "the Hugging Face Hub without network, download the model beforehand and set "
          "`HF_HUB_OFFLINE=1`"),
    Errno(111, "ECONNREFUSED", "Connection refused",
          "Nothing listens at the address and port it connected to: the server there has not "
          "started yet or has died (its own log says why), listens on another port, or listens "
          "on 127.0.0.1 only while it is reached from another host or container (start it with "
          "`--host 0.0.0.0`)"),
    Errno(113, "EHOSTUNREACH", "No route to host",
          "That host cannot be reached: it is down, or a firewall rejects the traffic; check "
          "the address and `nc -vz <host> <port>` from this machine"),
    Errno(121, "EREMOTEIO", "Remote I/O error"),
    Errno(122, "EDQUOT", "Disk quota exceeded",
          "Your disk quota on that filesystem is used up (home directories on shared clusters, "
          "where the caches live by default): point the caches at a filesystem with room, "
          "such as a scratch or project directory — " + _HF_CACHE + " — or free space "
          "(`quota -s` shows the limit)"),
    Errno(-2, "EAI_NONAME", "Name or service not known",
          "The host name could not be resolved: it is misspelled, or this machine's DNS does "
          "not know it (a name only another machine's /etc/hosts has); use an IP address or a "
          "name `getent hosts <name>` resolves here"),
    Errno(-3, "EAI_AGAIN", "Temporary failure in name resolution",
          "No DNS answered: the machine or container has no working DNS or network. For the "
          "Hugging Face Hub, download the model beforehand and set `HF_HUB_OFFLINE=1` (or give "
          "a local `--model-path`); otherwise fix the resolver (`/etc/resolv.conf`)"),
)}


def answer(number: str) -> tuple[str, str | None] | None:
    """(what errno `number` is, what to do about it or None); None for a number outside the
    vocabulary."""
    try:
        found = ERRNOS.get(int(number))
    except ValueError:
        return None
    if found is None:
        return None
    return f"errno {found.number} is {found.name} ({found.text}).", found.what_to_do



def said(captures: dict[str, str]) -> Said:
    number = captures.get(CAPTURE)
    return answer(number) if number is not None else None


remediation = answered_by(said)  # what the captured errno means ahead of the record's words
