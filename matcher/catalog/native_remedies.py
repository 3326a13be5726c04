"""What to do about a native library's failure, per status: the knowledge `matcher.catalog.native`
attaches to each string the libraries print (`native_vocab`).

Each `Remedy` says what happened (`documentation`) and, only where the way out is known, what an
operator can do (`solutions`, and `fix_actions` for the launch command). A status not listed
here still gets a record (the library's own words, its code and name), with no solutions: what
to do about it depends on the call that failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FixActions = tuple[tuple[dict[str, Any], ...], ...]


@dataclass(frozen=True, slots=True)
class Remedy:
    documentation: str
    solutions: tuple[str, ...] = ()
    fix_actions: FixActions = ()
    severity: str = "error"
    tags: tuple[str, ...] = field(default=())


_BLOCKING = {"op": "env", "name": "CUDA_LAUNCH_BLOCKING", "value": "1"}
_NO_GRAPH = {"op": "add", "flag": "--disable-cuda-graph"}
_NO_CUSTOM_AR = {"op": "add", "flag": "--disable-custom-all-reduce"}

_KERNEL_FAULT = (
    ("Rerun with CUDA_LAUNCH_BLOCKING=1: CUDA reports kernel faults asynchronously, at a later "
    "call, and with blocking launches the traceback names the kernel that faulted"),
    ("Relaunch with --disable-cuda-graph: if the failure goes away, a CUDA-graph replay (stale "
    "buffers or shapes captured for another batch) is at fault"),
    ("Upgrade sglang, sgl-kernel and flashinfer together to the latest release (kernel bugs are "
    "fixed there), or change the backend that ran the kernel (--attention-backend, "
    "--sampling-backend) to isolate it"),
)
_KERNEL_FAULT_ACTIONS: FixActions = ((_BLOCKING,), (_NO_GRAPH,))

# A panic is an `unwrap`/`expect`/index the component's code did not expect to fail: a bug of that
# release or an input it did not check. sglang's router turned panics into errors release by
# release (sglang#3016 for its start-up, #7619 for its health check), so the release is the fix.
RUST_PANIC = (
    ("Upgrade the Rust component the panic's file path names: sglang's router or gateway "
     "(`sglang_router_rs`, `sgl-router`, `sgl-model-gateway`, or a log of "
     "`sglang_router_rs::…` lines) with `pip install -U sglang-router` (or the image of a newer "
     "sglang), the tokenizers crate (`tokenizers-…` in the path) with `pip install -U "
     "tokenizers`; panics are fixed release by release"),
    ("If it still panics, rerun with RUST_BACKTRACE=1 and read the message on the panic's line "
     "(or the next one): it names the value that was missing or invalid (a worker URL, a "
     "tokenizer file, a request field), which is what to correct"),
)
_CONTEXT_LOST = (" The CUDA context is unusable afterwards: every later CUDA call in the process "
                 "fails, so the first such error in the log is the one that matters.")

_ARCH = (
    ("Install the builds of torch, sgl-kernel and flashinfer made for your GPU's compute "
    "capability and CUDA version (`python -c \"import torch; print(torch.cuda.get_device_capability(), "
    "torch.cuda.get_arch_list())\"` shows both: the GPU's sm must be in the list; Blackwell "
    "(sm_100, sm_120) needs the CUDA 12.8+ builds)"),
    ("When building a kernel package from source, set TORCH_CUDA_ARCH_LIST to your GPU's "
    "capability (for example `9.0` for H100) before building"),
)

# By CUDA runtime enum name (`cudaGetErrorName`). HIP statuses with the same text share them.
CUDA: dict[str, Remedy] = {
    "cudaErrorIllegalAddress": Remedy(
        "A GPU kernel read or wrote memory outside what it was given (an out-of-range index, a "
        "freed or foreign buffer)." + _CONTEXT_LOST, _KERNEL_FAULT, _KERNEL_FAULT_ACTIONS),
    "cudaErrorLaunchFailure": Remedy(
        "A kernel crashed on the GPU without a more specific cause (a trap, an invalid access, "
        "or a GPU fault the driver logs as an NVRM Xid in the kernel log)." + _CONTEXT_LOST,
        _KERNEL_FAULT, _KERNEL_FAULT_ACTIONS),
    "cudaErrorMisalignedAddress": Remedy(
        "A kernel accessed memory at an address not aligned for the access width (a tensor "
        "view with an odd offset passed to a vectorized kernel)." + _CONTEXT_LOST,
        _KERNEL_FAULT, _KERNEL_FAULT_ACTIONS),
    "cudaErrorIllegalInstruction": Remedy(
        "A kernel executed an invalid instruction (code built for another GPU, or a compiler "
        "bug)." + _CONTEXT_LOST, _KERNEL_FAULT, _KERNEL_FAULT_ACTIONS),
    "cudaErrorHardwareStackError": Remedy(
        "A kernel overflowed or corrupted its call stack on the GPU." + _CONTEXT_LOST,
        _KERNEL_FAULT, _KERNEL_FAULT_ACTIONS),
    "cudaErrorInvalidPc": Remedy(
        "A kernel jumped to an invalid program counter." + _CONTEXT_LOST,
        _KERNEL_FAULT, _KERNEL_FAULT_ACTIONS),
    "cudaErrorAssert": Remedy(
        "A `device_assert` inside a GPU kernel failed (an index out of range, in most kernels "
        "of torch: the lines `…Assertion … failed.` before it say which)." + _CONTEXT_LOST,
        (_KERNEL_FAULT[0], ("Check the inputs that reach the failing kernel: token ids beyond "
         "the vocabulary, a batch whose indices exceed the KV pool")), ((_BLOCKING,),)),
    "cudaErrorNoKernelImageForDevice": Remedy(
        "The library holds no compiled code (SASS, or PTX the driver can compile) for this "
        "GPU's architecture: the wheel was built for other GPUs.", _ARCH),
    "cudaErrorInvalidDeviceFunction": Remedy(
        "The kernel requested does not exist for this device: most often a build without code "
        "for this GPU's architecture.", _ARCH),
    "cudaErrorInvalidKernelImage": Remedy(
        "The kernel binary cannot be loaded on this device (built for another architecture or "
        "CUDA version, or corrupt).", _ARCH),
    "cudaErrorUnsupportedPtxVersion": Remedy(
        "The PTX was generated by a newer CUDA toolkit than the installed driver can compile.",
        (("Upgrade the NVIDIA driver to one that supports the CUDA version the packages were "
         "built with (`nvidia-smi` shows the highest CUDA version the driver supports)"),
         "Or install the packages built for the CUDA version your driver supports")),
    "cudaErrorInvalidPtx": Remedy(
        "The driver failed to JIT-compile a kernel's PTX (PTX for a newer toolkit or another "
        "architecture).", ("Upgrade the NVIDIA driver",) + _ARCH[:1]),
    "cudaErrorJitCompilerNotFound": Remedy(
        "The driver's PTX JIT compiler library (libnvidia-ptxjitcompiler) is missing: an "
        "incomplete driver install or container.",
        (("Install the full NVIDIA driver user-space libraries; in a container, run with the "
         "NVIDIA container runtime and NVIDIA_DRIVER_CAPABILITIES including `compute`"),)),
    "cudaErrorNoDevice": Remedy(
        "The CUDA runtime sees no GPU.",
        (("Check that `nvidia-smi` lists the GPUs in the same environment; in a container, run "
         "it with GPU access (`docker run --gpus all`, or the NVIDIA device plugin's "
         "`nvidia.com/gpu` resource)"),
         "Check CUDA_VISIBLE_DEVICES: an empty value or ids that do not exist hide every GPU")),
    "cudaErrorInvalidDevice": Remedy(
        "A GPU index was used that is not among the visible devices (CUDA_VISIBLE_DEVICES "
        "renumbers the GPUs it keeps from 0).",
        (("Make --tp-size × --dp-size (× --pp-size) plus --base-gpu-id fit in the GPUs "
         "CUDA_VISIBLE_DEVICES leaves visible"),)),
    "cudaErrorDevicesUnavailable": Remedy(
        "The GPU is busy or unavailable: in exclusive-process compute mode and used by another "
        "process, or prohibited.",
        (("Stop the other process on that GPU (`nvidia-smi` lists them), or set the GPU back to "
         "the default compute mode: `nvidia-smi -i N -c DEFAULT`"),)),
    "cudaErrorInsufficientDriver": Remedy(
        "The installed NVIDIA driver is older than the CUDA runtime the packages were built "
        "with.",
        ("Upgrade the NVIDIA driver (`nvidia-smi` shows the highest CUDA version it supports)",
         "Or install torch and the kernel packages built for an older CUDA version")),
    "cudaErrorCallRequiresNewerDriver": Remedy(
        "An API call needs a newer NVIDIA driver than the one installed.",
        ("Upgrade the NVIDIA driver",)),
    "cudaErrorStubLibrary": Remedy(
        "The `libcuda.so` loaded is the toolkit's stub (`…/lib64/stubs`), meant for linking "
        "only, instead of the driver's.",
        (("Remove the toolkit's `stubs` directory from LD_LIBRARY_PATH so the driver's "
         "libcuda.so.1 is loaded"),)),
    "cudaErrorSystemDriverMismatch": Remedy(
        "The user-space driver library (libcuda) and the loaded kernel module are of different "
        "driver versions: a driver upgraded without a reboot, or a container's libraries that "
        "do not match the host.",
        ("Reboot the node (or reload the nvidia kernel modules) after a driver upgrade",
         ("Remove a `cuda-compat` directory from LD_LIBRARY_PATH when the host driver is new "
         "enough"))),
    "cudaErrorCompatNotSupportedOnDevice": Remedy(
        "CUDA forward compatibility (the cuda-compat package) was used on a GPU that does not "
        "support it (only data-center GPUs do).",
        (("Remove the cuda-compat libraries from LD_LIBRARY_PATH and upgrade the NVIDIA driver "
         "instead"),)),
    "cudaErrorSystemNotReady": Remedy(
        "The system is not ready for CUDA: on NVSwitch systems (HGX A100/H100/H200, DGX), the "
        "NVIDIA Fabric Manager is not running or its version differs from the driver's.",
        (("Start the Fabric Manager at the driver's exact version: `systemctl enable --now "
         "nvidia-fabricmanager`"),)),
    "cudaErrorInitializationError": Remedy(
        "The CUDA driver could not be initialized in this process (driver not loaded, GPU "
        "unreachable, or CUDA used in a child forked after the parent initialized CUDA).",
        ("Check that `nvidia-smi` works in the same environment",)),
    "cudaErrorCudartUnloading": Remedy(
        "A CUDA call was made while the process was exiting and the runtime was being "
        "unloaded: a consequence of the shutdown, not its cause; look for the error before it.",
        severity="warning"),
    "cudaErrorContextIsDestroyed": Remedy(
        "A CUDA call used a context that was already destroyed: usually a consequence of an "
        "earlier failure or of shutdown; look for the error before it.", severity="warning"),
    "cudaErrorECCUncorrectable": Remedy(
        "The GPU reported an uncorrectable ECC memory error: a hardware fault.",
        (("Drain the node and reset the GPU (`nvidia-smi -r -i N`) or reboot; check `nvidia-smi "
         "-q -d ECC,ROW_REMAPPER` and have the GPU replaced if errors recur"),), severity="critical"),
    "cudaErrorNvlinkUncorrectable": Remedy(
        "An uncorrectable NVLink error occurred while the kernel ran: a link or hardware fault.",
        (("Check `nvidia-smi nvlink -e` for error counters, reset the GPUs or reboot the node, "
         "and have the hardware checked if it recurs"),), severity="critical"),
    "cudaErrorContained": Remedy(
        "A contained error: an invalid access of a peer GPU's memory over NVLink, or a "
        "hardware error the GPU contained to this process (Xid 94 in the kernel log).",
        (("Restart the server: the GPU stays usable for new processes; if the kernel log shows "
         "Xid 95 or errors recur, reset the GPU or drain the node"),), severity="critical"),
    "cudaErrorPeerAccessUnsupported": Remedy(
        "Direct peer-to-peer access is not supported between these two GPUs (no NVLink, and PCIe "
        "P2P unavailable or disabled: consumer GPUs, some virtualized or IOMMU setups).",
        ("Relaunch with --disable-custom-all-reduce (the custom all-reduce needs P2P access)",
         "Set NCCL_P2P_DISABLE=1 if NCCL itself fails on P2P"),
        ((_NO_CUSTOM_AR,), ({"op": "env", "name": "NCCL_P2P_DISABLE", "value": "1"},))),
    "cudaErrorLaunchOutOfResources": Remedy(
        "A kernel was launched with more registers, shared memory or threads per block than "
        "the GPU has: a kernel configuration tuned for another GPU, or a launch with an "
        "unusual shape.",
        (("Change the backend that launched it (--attention-backend, --moe-runner-backend) or "
         "upgrade sglang and sgl-kernel, whose kernels are tuned per GPU"),)),
    "cudaErrorLaunchTimeout": Remedy(
        "A kernel ran longer than the display watchdog allows: the GPU also drives a display.",
        ("Run on a GPU that drives no display, or stop the display server on it",)),
    "cudaErrorStreamCaptureUnsupported": Remedy(
        "An operation that is not allowed while a CUDA graph is being captured (a "
        "synchronization, a host copy, an allocation) ran inside the capture.",
        ("Relaunch with --disable-cuda-graph to run without CUDA graphs", ), ((_NO_GRAPH,),)),
    "cudaErrorStreamCaptureInvalidated": Remedy(
        "The CUDA-graph capture was invalidated by an earlier error during the capture: the "
        "first error logged is the cause.",
        ("Relaunch with --disable-cuda-graph to run without CUDA graphs",), ((_NO_GRAPH,),)),
    "cudaErrorStreamCaptureImplicit": Remedy(
        "An operation on the legacy default stream would depend on a stream being captured "
        "into a CUDA graph.",
        ("Relaunch with --disable-cuda-graph to run without CUDA graphs",), ((_NO_GRAPH,),)),
    "cudaErrorCapturedEvent": Remedy(
        "An event recorded during a CUDA-graph capture was queried or synchronized on.",
        ("Relaunch with --disable-cuda-graph to run without CUDA graphs",), ((_NO_GRAPH,),)),
    "cudaErrorStreamCaptureUnjoined": Remedy(
        "A CUDA-graph capture ended while work forked to another stream had not joined back.",
        ("Relaunch with --disable-cuda-graph to run without CUDA graphs",), ((_NO_GRAPH,),)),
    "cudaErrorStreamCaptureIsolation": Remedy(
        "A captured stream waited on work that was not captured.",
        ("Relaunch with --disable-cuda-graph to run without CUDA graphs",), ((_NO_GRAPH,),)),
    "cudaErrorStreamCaptureWrongThread": Remedy(
        "A CUDA-graph capture was ended from another thread than the one that began it.",
        ("Relaunch with --disable-cuda-graph to run without CUDA graphs",), ((_NO_GRAPH,),)),
    "cudaErrorMemoryAllocation": Remedy(
        "A CUDA allocation failed: the GPU is out of memory.",
        (("Lower --mem-fraction-static (for example by 0.05 at a time) to leave more memory "
         "outside the KV cache, or lower --cuda-graph-max-bs / --max-running-requests"),
         "Stop other processes using the GPU (`nvidia-smi`)")),
    "cudaErrorMpsConnectionFailed": Remedy(
        "The process is set up to use CUDA MPS but cannot reach the MPS control daemon.",
        (("Start the MPS daemon (`nvidia-cuda-mps-control -d`) with the same "
         "CUDA_MPS_PIPE_DIRECTORY, or unset CUDA_MPS_PIPE_DIRECTORY to run without MPS"),)),
}

# HIP texts that CUDA does not print, by HIP enum name.
HIP: dict[str, Remedy] = {
    "hipErrorNoDevice": Remedy(
        "The HIP runtime sees no AMD GPU.",
        (("Check that `rocm-smi` lists the GPUs in the same environment; in a container pass "
         "`--device=/dev/kfd --device=/dev/dri` and add the user to the `video` and `render` "
         "groups"),
         ("Check HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES: ids that do not exist hide every "
         "GPU"))),
    "hipErrorInsufficientDriver": Remedy(
        "The installed amdgpu driver (ROCk) is older than the ROCm runtime needs.",
        (("Upgrade the amdgpu driver to the version of your ROCm release, or use a ROCm "
         "release the installed driver supports"),)),
}

# By ncclResult_t.
NCCL: dict[int, Remedy] = {
    1: Remedy("NCCL got an error from a CUDA call (an earlier CUDA failure, a kernel fault, "
              "or out of memory); NCCL's own log says which with NCCL_DEBUG=INFO.",
              ("Rerun with NCCL_DEBUG=INFO and look for the `NCCL WARN Cuda failure` line",),
              (({"op": "env", "name": "NCCL_DEBUG", "value": "INFO"},),)),
    2: Remedy("A system call NCCL made failed: a socket, shared memory (/dev/shm too small in "
              "a container), or the network; NCCL_DEBUG=INFO says which.",
              ("Rerun with NCCL_DEBUG=INFO and read the `NCCL WARN` line before the error",
               ("In a container, give it enough shared memory (`--shm-size 16g` or "
               "`--ipc=host`)")),
              (({"op": "env", "name": "NCCL_DEBUG", "value": "INFO"},),)),
    3: Remedy("NCCL hit an internal error (an inconsistent topology, a bug, or a mismatch "
              "between the NCCL versions of the ranks).",
              (("Make every rank use the same NCCL version (the one torch ships: "
               "`python -c \"import torch; print(torch.cuda.nccl.version())\"`)"),)),
    4: Remedy("An NCCL call got an invalid argument (a null pointer, a bad count or type, a "
              "communicator mismatch).",
              ("Rerun with NCCL_DEBUG=WARN to see which argument",),
              (({"op": "env", "name": "NCCL_DEBUG", "value": "WARN"},),)),
    5: Remedy("NCCL was used in a way it does not allow: ranks calling collectives in "
              "different orders, a duplicate GPU in one communicator (two ranks on one GPU), "
              "or mismatched communicator arguments.",
              ("Rerun with NCCL_DEBUG=WARN to see the misuse",
               "Check that each rank runs on its own GPU (CUDA_VISIBLE_DEVICES, --base-gpu-id)"),
              (({"op": "env", "name": "NCCL_DEBUG", "value": "WARN"},),)),
    6: Remedy("A remote rank exited or the network between ranks failed: this error is often "
              "a consequence of another rank's crash; that rank's log has the cause.",
              ("Look in the other nodes' or ranks' logs for the first failure",)),
    7: Remedy("An NCCL operation is still in progress (a non-blocking communicator).",
              severity="warning"),
}

_GID = ("On RoCE, make the GID index select the RoCE v2 address of the interface (`show_gids` "
        "lists them): NVSHMEM_IB_GID_INDEX for NVSHMEM/DeepEP, NCCL_IB_GID_INDEX for NCCL, "
        "MC_GID_INDEX for Mooncake")
_IB_CHECK = ("Check the RDMA path between the two nodes with `ib_write_bw` (perftest) on the same "
             "devices; the port must be ACTIVE (`ibstat`)")

# NCCL WARN formats by their head (the text before the first conversion).
NCCL_WARN: dict[str, Remedy] = {
    "socketStartConnect: Connect to ": Remedy(
        "NCCL could not open a TCP connection to another rank (bootstrap or socket transport): "
        "the address is unreachable from this node, a firewall blocks the port, or the wrong "
        "network interface was chosen.",
        (("Set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to the interface the nodes reach "
         "each other on (for example `eth0`)"),
         "Open the ports between the nodes (NCCL uses random high ports)")),
    "socketPollConnect: Connect to ": Remedy(
        "NCCL could not open a TCP connection to another rank: the address is unreachable, a "
        "firewall blocks the port, or the wrong network interface was chosen.",
        (("Set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to the interface the nodes reach "
         "each other on"),)),
    "socketStartConnect: exceeded ": Remedy(
        "NCCL gave up connecting to another rank after its retries: that rank is not "
        "listening (not started, crashed) or unreachable.",
        (("Check that every node started and reached NCCL initialization; set "
         "NCCL_SOCKET_IFNAME to the interface the nodes reach each other on"),)),
    "socketPollConnect: exceeded ": Remedy(
        "NCCL gave up connecting to another rank after its retries: that rank is not "
        "listening (not started, crashed) or unreachable.",
        (("Check that every node started and reached NCCL initialization; set "
         "NCCL_SOCKET_IFNAME to the interface the nodes reach each other on"),)),
    "Bootstrap : no socket interface found": Remedy(
        "NCCL found no network interface to bootstrap on: NCCL_SOCKET_IFNAME names an "
        "interface that does not exist on this node, or none is up.",
        ("Set NCCL_SOCKET_IFNAME to an interface `ip addr` shows on every node",)),
    "NET/Socket : No usable listening interface found": Remedy(
        "NCCL's socket transport found no interface to listen on (NCCL_SOCKET_IFNAME names none "
        "that exists here).",
        ("Set NCCL_SOCKET_IFNAME to an interface `ip addr` shows on every node",)),
    "NET/IB : No device found.": Remedy(
        "NCCL found no usable InfiniBand/RoCE device: none present, the drivers are not "
        "loaded, /dev/infiniband is not passed to the container, or NCCL_IB_HCA names none.",
        (("In a container, pass /dev/infiniband and the IPC_LOCK capability (or use "
         "--privileged); check NCCL_IB_HCA against `ibv_devinfo`"),
         "If the nodes have no RDMA network, set NCCL_IB_DISABLE=1 to use TCP"),
        (({"op": "env", "name": "NCCL_IB_DISABLE", "value": "1"},),), "warning"),
    "Failed to open libibverbs.so[.1]": Remedy(
        "NCCL could not load libibverbs: the RDMA user-space libraries are not installed.",
        (("Install rdma-core (libibverbs) where the nodes use InfiniBand/RoCE, or set "
         "NCCL_IB_DISABLE=1 to use TCP"),), severity="warning"),
    "NET/IB : Got completion from peer ": Remedy(
        "An RDMA operation between two ranks failed on the wire (the status names the verbs "
        "error: 12 is a transport retry timeout, 13 an RNR retry, 4 a protection error): a "
        "flapping or misconfigured link, a peer that died, or a GID/routing mismatch on RoCE.",
        (_IB_CHECK, _GID, "If the peer died, its log has the first failure")),
    "NET/IB: Got completion from peer ": Remedy(
        "An RDMA operation between two ranks failed on the wire (the status names the verbs "
        "error: 12 is a transport retry timeout, 13 an RNR retry, 4 a protection error): a "
        "flapping or misconfigured link, a peer that died, or a GID/routing mismatch on RoCE.",
        (_IB_CHECK, _GID, "If the peer died, its log has the first failure")),
    "Call to ibv_modify_qp failed ": Remedy(
        "Moving an RDMA queue pair to its next state failed: the address handle (GID index, "
        "port, MTU) does not fit the link, or the port is down.",
        (_GID, _IB_CHECK)),
    "Call to ibv_reg_mr failed ": Remedy(
        "Registering memory with the RDMA device failed: usually the locked-memory limit "
        "(ulimit -l) is too low, or GPU memory registration (nvidia-peermem) is unavailable.",
        (("Raise the locked-memory limit: `ulimit -l unlimited`, or in docker `--ulimit "
         "memlock=-1` and `--cap-add IPC_LOCK`"),
         "For GPUDirect RDMA, load the nvidia-peermem kernel module")),
    "Call to ibv_create_qp failed ": Remedy(
        "Creating an RDMA queue pair failed: device resources or the locked-memory limit are "
        "exhausted.",
        ("Raise the locked-memory limit (`ulimit -l unlimited`, docker `--ulimit memlock=-1`)",)),
    "Error : ring ": Remedy(
        "NCCL built an inconsistent ring: the ranks disagree on the topology (different NCCL "
        "versions or settings between nodes).",
        ("Use the same NCCL version and NCCL_* settings on every node",)),
}

# NVSHMEM transport failures by message; the status printed before is an errno value.
NVSHMEM: dict[str, Remedy] = {
    "ibv_modify_qp failed": Remedy(
        "NVSHMEM's InfiniBand transport could not move a queue pair to its next state (the "
        "status is an errno: 22 EINVAL, 110 ETIMEDOUT): on RoCE most often the GID index does "
        "not select a routable address, or the HCAs chosen do not reach each other.",
        (_GID, ("Restrict NVSHMEM to the NICs wired for it with NVSHMEM_HCA_LIST (for example "
         "`mlx5_0:1,mlx5_1:1`)"), _IB_CHECK)),
    "ep_connect failed": Remedy(
        "NVSHMEM could not connect an endpoint to a peer: follows a queue-pair or network "
        "failure logged just before (ibv_modify_qp).", (_GID, _IB_CHECK)),
    "ibv_poll_cq failed": Remedy(
        "An RDMA completion reported an error in NVSHMEM's transport: a link problem or a peer "
        "that died.", (_IB_CHECK,)),
    "ibv_post_send failed": Remedy(
        "NVSHMEM could not post an RDMA send: the queue pair is in an error state after an "
        "earlier failure, or its queue is full.", (_IB_CHECK,)),
    "NVSHMEM API called before NVSHMEM initialization has completed": Remedy(
        "An NVSHMEM call (DeepEP's buffers, a team split) ran although NVSHMEM's initialization "
        "failed or never ran: the failure that stopped it is logged before this line (an "
        "InfiniBand transport error such as `ibv_modify_qp failed` or `ep_connect failed`, or a "
        "bootstrap error).",
        ("If `ibv_modify_qp failed` or `ep_connect failed` is logged before it: " + _GID[0].lower()
         + _GID[1:], _IB_CHECK)),
    "cq creation failed": Remedy(
        "NVSHMEM could not create an RDMA completion queue: the locked-memory limit or the "
        "device's resources are exhausted.",
        ("Raise the locked-memory limit (`ulimit -l unlimited`, docker `--ulimit memlock=-1`)",)),
}

# A native crash's own line is rarely the cause: the line the library printed just before it
# is, and that line is an event of its own. When none was printed, the native packages' builds
# are the usual suspect: sglang's issue template asks for `python3 -m sglang.check_env`, which
# prints the installed versions of torch, sgl-kernel, flashinfer, triton and the rest, and
# `pip check` names the installed ones sglang's requirements do not allow.
_CAUSE_ABOVE = ("The cause is the line printed just before this one ({lines}): it says what "
                "failed, and its own event carries the fix")
_PINNED_NATIVE = ("When nothing was printed before it: run `pip check` (it names every installed "
                  "package whose version sglang's requirements do not allow) and `python3 -m "
                  "sglang.check_env`, and install torch, sgl-kernel and flashinfer at the versions "
                  "this sglang release requires: a native wheel built against another torch or "
                  "CUDA crashes this way")

# Signals faulthandler names in `Fatal Python error: <name>`.
FATAL_SIGNALS: dict[str, Remedy] = {
    "Segmentation fault": Remedy(
        "The Python process was killed by SIGSEGV: native code (a CUDA/C++ extension, a "
        "tokenizer, a grammar library) accessed invalid memory. The faulthandler dump after "
        "this line shows the Python frame that called into it (`Current thread …`, innermost "
        "last).",
        (("Upgrade the package whose frame is innermost in the `Current thread` dump; check that "
         "its build matches the installed torch and CUDA (a wheel built against another torch "
         "crashes this way)"),), severity="critical"),
    "Aborted": Remedy(
        "The Python process aborted (SIGABRT): native code called abort(), usually after a C++ "
        "exception nobody caught (`terminate called after throwing …`) or a failed C assertion "
        "printed just before.",
        (_CAUSE_ABOVE.format(lines="`terminate called after throwing an instance of …` and its "
                             "`what():`, a `… Assertion … failed.` or a glog `F…` line"),
         _PINNED_NATIVE), severity="critical"),
    "Bus error": Remedy(
        "The process was killed by SIGBUS: most often shared memory (/dev/shm) ran out while "
        "being written, in a container with the default 64 MB.",
        ("Give the container more shared memory: `docker run --shm-size 32g` or `--ipc=host`",),
        severity="critical"),
    "Floating point exception": Remedy(
        "The process was killed by SIGFPE: an integer division by zero in native code.",
        severity="critical"),
    "Illegal instruction": Remedy(
        "The process was killed by SIGILL: native code built for a newer CPU (AVX-512, AVX2) "
        "than this one, or a corrupt binary.",
        ("Install builds of the native packages made for this CPU",), severity="critical"),
}

# NVIDIA Xid codes (the driver's GPU error events in the kernel log), from NVIDIA's Xid catalog.
_RESET = "Reset the GPU (`nvidia-smi -r -i N`, with no process on it) or reboot the node"
_DRAIN = "If it recurs on the same GPU, drain the node and have the GPU checked (RMA)"
XID: dict[int, Remedy] = {
    13: Remedy("Xid 13, graphics engine exception: a kernel faulted (an out-of-range access, an "
               "illegal instruction); usually the application's, as CUDA reports it.",
               _KERNEL_FAULT[:2], _KERNEL_FAULT_ACTIONS),
    31: Remedy("Xid 31, GPU memory page fault: a kernel accessed an unmapped address (CUDA "
               "reports `an illegal memory access was encountered`); usually the "
               "application's.", _KERNEL_FAULT[:2], _KERNEL_FAULT_ACTIONS),
    43: Remedy("Xid 43, GPU stopped processing: the driver stopped a channel after an "
               "application fault; the GPU itself is fine.",
               ("Restart the server process",)),
    45: Remedy("Xid 45, preemptive cleanup: the driver tore down a channel because the process "
               "was killed or after an earlier Xid; the earlier one is the cause.",
               severity="warning"),
    48: Remedy("Xid 48, double-bit ECC error: an uncorrectable memory error on the GPU.",
               (_RESET, _DRAIN), severity="critical"),
    61: Remedy("Xid 61, internal micro-controller breakpoint/warning.",
               (_RESET, "Upgrade the NVIDIA driver"), severity="critical"),
    62: Remedy("Xid 62, internal micro-controller halt.",
               (_RESET, "Upgrade the NVIDIA driver"), severity="critical"),
    63: Remedy("Xid 63, ECC page retirement or row remapping recorded: memory was remapped and "
               "takes effect after a GPU reset.", (_RESET,), severity="warning"),
    64: Remedy("Xid 64, ECC page retirement or row remapper recording failure: the GPU could not "
               "retire or remap failing memory.", (_DRAIN,), severity="critical"),
    74: Remedy("Xid 74, NVLink error: a link between GPUs reported errors.",
               ("Check `nvidia-smi nvlink -e` error counters", _RESET, _DRAIN),
               severity="critical"),
    79: Remedy("Xid 79, GPU has fallen off the bus: the GPU stopped answering on PCIe (power, "
               "thermal, PCIe link or hardware failure). Every process on it is lost.",
               ("Reboot the node; check power delivery, cooling and PCIe seating", _DRAIN),
               severity="critical"),
    92: Remedy("Xid 92, high single-bit ECC error rate.", (_DRAIN,), severity="warning"),
    94: Remedy("Xid 94, contained ECC error: an uncorrectable memory error was contained to the "
               "application using that memory; other processes are unaffected.",
               ("Restart the affected server; the GPU stays usable. " + _DRAIN,),
               severity="critical"),
    95: Remedy("Xid 95, uncontained ECC error: every application on the GPU is affected.",
               (_RESET, _DRAIN), severity="critical"),
    119: Remedy("Xid 119, GSP RPC timeout: the GPU System Processor firmware stopped answering "
                "the driver.", (_RESET, "Upgrade the NVIDIA driver"), severity="critical"),
    120: Remedy("Xid 120, GSP error: the GPU System Processor firmware reported an error.",
                (_RESET, "Upgrade the NVIDIA driver"), severity="critical"),
}

AMDGPU_FAULT = Remedy(
    "An AMD GPU memory page fault (the kernel log of the amdgpu driver): a kernel accessed an "
    "address not mapped for its process — the ROCm counterpart of CUDA's illegal memory access. "
    "The `for process … pid …` line names the process.",
    (("Rerun with AMD_SERIALIZE_KERNEL=3 and HIP_LAUNCH_BLOCKING=1 to find the kernel that "
     "faulted"), "Relaunch with --disable-cuda-graph to see whether a graph replay is at fault",
     "Upgrade sglang, sgl-kernel and the ROCm build of torch together"),
    (({"op": "env", "name": "HIP_LAUNCH_BLOCKING", "value": "1"},), (_NO_GRAPH,)))

# The texts HIP prints as CUDA does, by HIP enum name, for the lines that say `HIP error: …`:
# what to do on ROCm, whose tools differ from the ones the CUDA remedies name (rocm-smi,
# AMD_SERIALIZE_KERNEL, gfx architectures, PYTORCH_ROCM_ARCH).
_ROCM_ARCH = (
    ("Install the ROCm builds of torch, sgl-kernel and aiter made for your GPU's architecture: "
     "`rocminfo | grep gfx` names it (gfx942 for MI300X) and `python -c \"import torch; "
     "print(torch.cuda.get_arch_list())\"` lists the ones torch was built for; the GPU's must be "
     "among them"),
    ("When building a kernel package from source, set PYTORCH_ROCM_ARCH to your GPU's gfx "
     "architecture before building"),
)
_ROCM_VISIBLE = (
    ("Check that `rocm-smi` lists the GPUs in the same environment; in a container pass "
     "`--device=/dev/kfd --device=/dev/dri` and add the user to the `video` and `render` "
     "groups"),)
_ROCM_CONTEXT_LOST = (" The GPU context is unusable afterwards: every later HIP call in the "
                      "process fails, so the first such error in the log is the one that matters.")
HIP_SHARED: dict[str, Remedy] = {
    "hipErrorIllegalAddress": Remedy(
        "A GPU kernel read or wrote memory outside what it was given (an out-of-range index, a "
        "freed or foreign buffer)." + _ROCM_CONTEXT_LOST, AMDGPU_FAULT.solutions,
        AMDGPU_FAULT.fix_actions),
    "hipErrorLaunchFailure": Remedy(
        "A kernel crashed on the GPU without a more specific cause (a trap, an invalid access; "
        "the amdgpu driver logs a page fault in the kernel log)." + _ROCM_CONTEXT_LOST,
        AMDGPU_FAULT.solutions, AMDGPU_FAULT.fix_actions),
    "hipErrorAssert": Remedy(
        "A device-side assert inside a GPU kernel failed (an index out of range, in most kernels "
        "of torch)." + _ROCM_CONTEXT_LOST,
        (AMDGPU_FAULT.solutions[0], ("Check the inputs that reach the failing kernel: token ids "
                                     "beyond the vocabulary, a batch whose indices exceed the KV "
                                     "pool")),
        AMDGPU_FAULT.fix_actions[:1]),
    "hipErrorInvalidDeviceFunction": Remedy(
        "A kernel has no code for this GPU's architecture: the wheel or image was built for other "
        "AMD GPUs.", _ROCM_ARCH),
    "hipErrorNoBinaryForGpu": Remedy(
        "No kernel in the binary was built for this GPU's architecture.", _ROCM_ARCH),
    "hipErrorInvalidImage": Remedy(
        "The kernel binary cannot be loaded on this device (built for another architecture or "
        "ROCm release, or corrupt).", _ROCM_ARCH),
    "hipErrorOutOfMemory": Remedy(
        "A HIP allocation failed: the GPU is out of memory.",
        (("Lower --mem-fraction-static (for example by 0.05 at a time) to leave more memory "
          "outside the KV cache, or lower --cuda-graph-max-bs / --max-running-requests"),
         "Stop other processes using the GPU (`rocm-smi --showpids` lists them)")),
    "hipErrorNotInitialized": Remedy(
        "The HIP runtime could not be initialized in this process (amdgpu driver not loaded, "
        "GPU unreachable, or HIP used in a child forked after the parent initialized it).",
        _ROCM_VISIBLE),
    "hipErrorECCNotCorrectable": Remedy(
        "The GPU reported an uncorrectable ECC memory error: a hardware fault.",
        (("Read the GPU's error counts with `rocm-smi --showrasinfo`, reset the GPU or reboot the "
          "node, and if it recurs on the same GPU take it out of service and have it checked"),),
        severity="critical"),
}

_MEMORY = ("Lower --mem-fraction-static (for example by 0.05 at a time): the KV cache takes the "
           "memory the library's workspace or handle needs")
_FIRST_FAULT = ("Rerun with CUDA_LAUNCH_BLOCKING=1: the first failing kernel is then the one "
                "reported, not a later library call")

# By cublasStatus_t / cudnnStatus_t name.
LIBRARY_STATUS: dict[str, Remedy] = {
    "CUBLAS_STATUS_NOT_INITIALIZED": Remedy(
        "cuBLAS could not create its handle: most often the GPU had no memory left for it "
        "(torch creates the handle at the first matrix multiply), else a broken CUDA setup.",
        (_MEMORY,)),
    "CUBLAS_STATUS_ALLOC_FAILED": Remedy(
        "cuBLAS could not allocate GPU memory for its workspace.", (_MEMORY,)),
    "CUBLAS_STATUS_EXECUTION_FAILED": Remedy(
        "A cuBLAS kernel failed to launch or run: usually a consequence of an earlier CUDA "
        "fault in the process, or of a kernel not built for this GPU.", (_FIRST_FAULT,),
        ((_BLOCKING,),)),
    "CUBLAS_STATUS_INTERNAL_ERROR": Remedy(
        "cuBLAS failed internally: usually an earlier CUDA error or an allocation failure inside "
        "the library.", (_FIRST_FAULT, _MEMORY), ((_BLOCKING,),)),
    "CUBLAS_STATUS_ARCH_MISMATCH": Remedy(
        "The operation needs a GPU feature this GPU lacks (a data type such as bfloat16 or FP8 "
        "before the architecture that introduced it).",
        (("Run the model in a data type this GPU supports (`--dtype float16` on GPUs older than "
         "Ampere), or with a quantization it supports"),)),
    "CUDNN_STATUS_NOT_INITIALIZED": Remedy(
        "cuDNN could not initialize its handle: the GPU had no memory left, or the cuDNN library "
        "does not fit the CUDA runtime.", (_MEMORY,)),
    "CUDNN_STATUS_VERSION_MISMATCH": Remedy(
        "The cuDNN libraries loaded are of different versions (two cuDNN installs, one on "
        "LD_LIBRARY_PATH).",
        (("Keep one cuDNN: the `nvidia-cudnn-cu12` wheel torch depends on; remove other cuDNN "
         "directories from LD_LIBRARY_PATH"),)),
    "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH": Remedy(
        "cuDNN's sub-libraries loaded are of different versions (two cuDNN installs mixed).",
        (("Keep one cuDNN: the `nvidia-cudnn-cu12` wheel torch depends on; remove other cuDNN "
         "directories from LD_LIBRARY_PATH"),)),
    "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED": Remedy(
        "A cuDNN sub-library (libcudnn_*.so) could not be loaded: missing, or shadowed by "
        "another cuDNN install.",
        (("Reinstall the `nvidia-cudnn-cu12` wheel torch depends on and remove other cuDNN "
         "directories from LD_LIBRARY_PATH"),)),
}

# Native lines of the KV-transfer engines sglang's PD disaggregation and HiCache use. sglang's
# disaggregation guide selects Mooncake's RDMA device with `--disaggregation-ib-device`; its
# HiCache Mooncake store reads the device and protocol from MOONCAKE_DEVICE and
# MOONCAKE_PROTOCOL; NIXL carries its own UCX, and the guide builds NIXL from source against an
# existing UCX install.
MOONCAKE_TRANSFER_TIMEOUT = Remedy(
    "Mooncake's transfer engine gave up on a batch of transfers after the seconds shown: no "
    "data moved between this node's buffers and the peer's (the RDMA device chosen does not "
    "reach the peer, a RoCE GID mismatch, the TCP fallback blocked, or the peer process died). "
    "sglang then fails the request, or the HiCache set-up that issued it.",
    (("Give Mooncake the RDMA device that reaches the peer (`ibv_devices` lists them): "
      "`--disaggregation-ib-device mlx5_X` for PD disaggregation, `MOONCAKE_DEVICE=mlx5_X` "
      "with `MOONCAKE_PROTOCOL=rdma` for the HiCache Mooncake store (`MOONCAKE_PROTOCOL=tcp` "
      "on nodes without RDMA)"),
     _IB_CHECK, _GID,
     ("If the peer's server or the Mooncake master stopped, its own log has the cause: restart "
      "it before retrying")))

UCX_SIGNAL = Remedy(
    "UCX's signal handler (`[host:pid:thread:tid] Caught signal N (…)`) caught a fatal signal in "
    "this process: the native code that faulted runs in it (a UCX or NIXL transfer, or another "
    "library loaded in the process); UCX prints its backtrace next, whose innermost named "
    "library (`libucp`, `libuct_*`, `libnixl*`) says which.",
    (("If the backtrace is in UCX or NIXL (sglang's `--disaggregation-transfer-backend nixl`): "
      "make NIXL use one UCX — the one its wheel carries (`pip install -U nixl`, with no other "
      "UCX on LD_LIBRARY_PATH), or build NIXL against the installed UCX "
      "(`pip install . --config-settings=setup-args=\"-Ducx_path=/path/to/ucx\"` in a NIXL "
      "checkout, as sglang's disaggregation guide says)"),
     ("To get past it meanwhile, run the transfer with the other backend: "
      "`--disaggregation-transfer-backend mooncake` on both prefill and decode servers "
      "(needs `pip install mooncake-transfer-engine`)"),
     _PINNED_NATIVE.replace("When nothing was printed before it", "If the backtrace is in "
                            "torch or a kernel package")),
    severity="critical")

# `terminate called after throwing an instance of 'xgrammar::…'`: xgrammar, sglang's default
# grammar backend, threw while compiling or matching a request's grammar, in a native thread,
# and the whole server aborts. The request's JSON schema, regex or EBNF is what it could not
# handle (the `what():` line says why); another backend compiles it differently.
XGRAMMAR_ABORT = Remedy(
    "xgrammar (sglang's default structured-output backend) threw a C++ exception that nothing "
    "caught while compiling or matching a request's grammar: the server process aborts. The "
    "`what():` line after it says what it could not handle (a schema nested too deep for its "
    "recursion guard, an unsupported regex or JSON-schema feature).",
    (("Serve structured output with another grammar backend: `--grammar-backend llguidance` "
      "(or `outlines`); sglang then compiles the same request's grammar with it"),
     ("Upgrade xgrammar to the newest release this sglang allows (`pip install -U xgrammar`, "
      "then `pip check`): xgrammar's releases widen what it compiles"),
     ("Until then, reject or simplify the request's schema (the one being compiled when it "
      "aborted: nesting depth, recursive `$ref`)")),
    severity="critical")


MOONCAKE_BATCH_RPC = Remedy(
    "Mooncake Store's client (sglang's HiCache `mooncake` storage backend) sent a batch of "
    "calls to `mooncake_master` and got no result back (`MasterClient::invoke_batch_rpc`, "
    "mooncake-store/src/master_client.cpp): every call of the batch fails with RPC_FAIL (or "
    "RPC_TIMEOUT), so the pages it was to read or write are not read or written. The text "
    "after the colon is coro_rpc's: a transport error, or the text of an exception the master "
    "threw serving the call.",
    (("When the text is a connection error (refused, reset, end of file, timed out), the "
      "client lost `mooncake_master`: check that it is running and reachable from this node at "
      "the master address sglang was given (`MOONCAKE_MASTER` or the config's "
      "`master_server_address`)"),
     ("When the text is a message of Mooncake's own code, Mooncake failed serving the call: "
      "`Expected DiskDescriptor` is a page offloaded to SSD read back as the wrong kind of "
      "replica, whose read paths Mooncake 0.3.11 reworked (kvcache-ai/Mooncake#2004) — run "
      "the same release, 0.3.11 or newer, on the master and on every sglang node "
      "(`pip install -U 'mooncake-transfer-engine>=0.3.11'`); if it stays, report it to "
      "kvcache-ai/Mooncake with the master's log")))

