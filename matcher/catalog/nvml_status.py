"""What an NVML error says, when a line reports why NVML (the NVIDIA driver's management library)
could not start: `Failed to initialize NVML: Driver/library version mismatch`.

nvidia-smi, torch and every tool that reads GPU state through NVML print `nvmlErrorString` of
the `nvmlReturn_t` that `nvmlInit` returned — a closed vocabulary of the driver's
(`Driver/library version mismatch`, `Unknown Error`, `Driver Not Loaded` …); NVIDIA's Python
binding (nvidia-ml-py, `pynvml.NVMLError`) falls back to its own words for some of them when the
library cannot say (`RM has detected an NVML/RM version mismatch.`). Each means a different
state of the host's driver, and the line alone does not say what to do about it: a driver
upgraded without a reboot (oneflow-inc/oneflow#3106, tinygrad/open-gpu-kernel-modules#47), a
container that lost its GPU device nodes after the host reloaded systemd
(NVIDIA/nvidia-docker#1671), a kernel module that is not loaded.

The record captures the text as `nvml_error` (`matcher.pipeline.vocabulary_answered` applies
this to every event that has one).
"""

from __future__ import annotations

from matcher.catalog.answer import Said, answered_by

CAPTURE = "nvml_error"

_MISMATCH = (
    ("The NVIDIA kernel module that is loaded is another version than the driver's user-space "
     "libraries (libnvidia-ml): the driver was upgraded — often by unattended upgrades — and "
     "the host was not rebooted."),
    ("Reboot the host, or unload and reload the nvidia kernel modules while no process uses "
     "the GPU; `cat /proc/driver/nvidia/version` (the module) must match the NVML library "
     "version nvidia-smi prints. Inside a container this is the host's state: fix it on the "
     "host"))
_UNKNOWN = (
    ("NVML failed for a reason the driver did not name; in a container where the GPU worked "
     "before, the container has lost access to the GPU's device nodes (a `systemctl "
     "daemon-reload` on the host, or an update that runs one, drops the device rules the "
     "NVIDIA runtime set)."),
    ("In a container: restart it; if it recurs, follow the NVIDIA Container Toolkit's notice "
     "for this error (pass the /dev/nvidia* device nodes with --device, or use CDI). On the "
     "host: look for NVRM/Xid lines in `dmesg` and reboot"))
_NOT_LOADED = (
    "The nvidia kernel module is not loaded.",
    ("Check `lsmod | grep nvidia`: after a kernel update the module must be rebuilt for the "
     "new kernel (DKMS) — reinstall the driver or boot the kernel it was built for; with "
     "Secure Boot on, an unsigned module is refused"))
_NO_LIBRARY = (
    "libnvidia-ml.so.1, the driver's NVML library, was not found.",
    ("In a container, start it with the NVIDIA runtime (`--gpus all`, `runtime: nvidia`, or "
     "the Kubernetes device plugin), which mounts the host driver's libraries; on a host, the "
     "NVIDIA driver's user-space part is not installed"))
_PERMISSION = (
    "The process may not open the GPU's device nodes (/dev/nvidia*).",
    ("Run it as a user allowed to use the GPU (the video group on most distributions), or "
     "start the container with --gpus"))
_LOST = (
    ("The GPU has fallen off the bus (the kernel log shows `NVRM: Xid … 79`): a hardware, "
     "power or cooling fault, not the software."),
    ("Reset the GPU (`nvidia-smi -r`) or reboot the host; if it recurs, have the GPU and its "
     "power and cooling checked"))
_BLOCKED = (
    ("The operating system refused the request (a virtual machine or WSL that does not pass "
     "this operation through)."),
    None)

MEANINGS: dict[str, tuple[str, str | None]] = {
    "driver/library version mismatch": _MISMATCH,
    "rm has detected an nvml/rm version mismatch": _MISMATCH,
    "unknown error": _UNKNOWN,
    "driver not loaded": _NOT_LOADED,
    "nvml shared library not found": _NO_LIBRARY,
    "insufficient permissions": _PERMISSION,
    "gpu is lost": _LOST,
    "gpu access blocked by the operating system": _BLOCKED,
    "the operating system has blocked the request": _BLOCKED,
}


def answer(text: str) -> tuple[str, str | None] | None:
    """(what the NVML error means, what to do or None); None for a text not in the table."""
    return MEANINGS.get(text.strip().rstrip(".").lower())



def said(captures: dict[str, str]) -> Said:
    text = captures.get(CAPTURE)
    return answer(text) if text else None


remediation = answered_by(said)  # what the NVML error means ahead of the record's words
