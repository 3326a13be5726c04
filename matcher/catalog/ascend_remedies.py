"""What to do about an Ascend NPU status, per name: the knowledge `matcher.catalog.ascend`
attaches to the ACL and HCCL codes torch_npu prints.

A status not listed here keeps torch_npu's own advice (`NPUErrorCodes.h`); the statuses listed
are those whose way out for a serving process is known: the NPU cannot be reached, its memory
ran out, an operator faulted on it, the device reports a memory or link fault, or HCCL could
not reach its peers.
"""

from __future__ import annotations

# torch_npu's advice for most runtime codes ("Rectify the fault based on the error information
# in the ascend log"), said as what to do.
GENERIC = "Rectify the fault based on the error information in the ascend log"
GENERIC_ADVICE = (
    "Read the CANN error lines printed right after this one (codes such as EZ9999, EE…, EI…, "
    "with a TraceBack naming the failing call) and the device log under $HOME/ascend/log (or "
    "ASCEND_PROCESS_LOG_PATH): they name the operator or driver call that failed")

_REACH = (
    ("Check that the NPU is present and healthy with npu-smi info, and that no other process "
     "holds it (npu-smi info lists the processes per NPU; stop them or choose other NPUs with "
     "ASCEND_RT_VISIBLE_DEVICES)"),
    ("In a container, pass the devices and the driver: --device=/dev/davinciN (each NPU used), "
     "--device=/dev/davinci_manager --device=/dev/devmm_svm --device=/dev/hisi_hdc and "
     "-v /usr/local/Ascend/driver:/usr/local/Ascend/driver"),
    ("The CANN toolkit and torch_npu must be releases the installed NPU driver and firmware "
     "support, and built for this chip (an image for Atlas A2/910B does not run on A3/910C): "
     "compare /usr/local/Ascend/driver/version.info with the image's CANN version, and source "
     "/usr/local/Ascend/ascend-toolkit/set_env.sh before launching"),
)
_MEMORY = (
    ("Free NPU memory: stop other processes on the NPU (npu-smi info lists them), then lower "
     "--mem-fraction-static (for example 0.8), --max-running-requests or "
     "--chunked-prefill-size, or spread the model over more NPUs (--tp-size)"),
)
_OPERATOR = (
    ("Rerun with ASCEND_LAUNCH_BLOCKING=1: the NPU reports an operator's fault at a later "
     "call, and with blocking launches the traceback names the operator that faulted"),
    ("Use torch_npu and CANN releases made for each other (and the sglang NPU image of the "
     "same release); if the fault is in a graph replay, relaunch with --disable-cuda-graph to "
     "isolate it"),
)
_TIMEOUT = (
    ("A task on the NPU did not finish in time: when it is a collective, one rank stopped or "
     "hung first — find the first error on every rank; otherwise rerun with "
     "ASCEND_LAUNCH_BLOCKING=1 to name the operator"),
    ("For collectives that are slow but alive (large first compilation, long prefill), raise "
     "HCCL_EXEC_TIMEOUT (seconds) and sglang's --watchdog-timeout"),
)
_HARDWARE = (
    ("The NPU reports a hardware fault: check npu-smi info (Health) on the host; take this NPU "
     "out of service (ASCEND_RT_VISIBLE_DEVICES without it) and reset it (npu-smi set -t reset "
     "-i <card> -c <chip>) or have it serviced before using it again"),
)
_LINK = (
    ("HCCL could not reach a peer: set HCCL_IF_IP (or HCCL_SOCKET_IFNAME) to the interface "
     "that reaches the other ranks, allow the ports from HCCL_IF_BASE_PORT (default 60000) "
     "through the firewall, and check the NPU links with hccn_tool -i <N> -link -g"),
    ("Start every node with the same --dist-init-addr, --nnodes and --tp-size; raise "
     "HCCL_CONNECT_TIMEOUT (seconds) when the nodes start minutes apart"),
)
_HCCL_MEMORY = (
    ("HCCL needs NPU memory for its buffers: lower --mem-fraction-static, or make them smaller "
     "with HCCL_BUFFSIZE (MB)"),
)

REMEDIES: dict[str, tuple[str, ...]] = {
    "ACL_ERROR_RT_DEV_SETUP_ERROR": _REACH, "ACL_ERROR_RT_NO_DEVICE": _REACH,
    "ACL_ERROR_RT_INVALID_DEVICEID": _REACH, "ACL_ERROR_INVALID_DEVICE": _REACH,
    "ACL_ERROR_RT_CONTEXT_NULL": _REACH, "ACL_ERROR_RT_SOC_VERSION": _REACH,
    "ACL_ERROR_RT_NO_PERMISSION": _REACH, "ACL_ERROR_RT_DRV_INTERNAL_ERROR": _REACH,
    "ACL_ERROR_RT_SOCKET_CLOSE": _REACH, "ACL_ERROR_DRV_FAILURE": _REACH,
    "ACL_ERROR_RT_LOST_HEARTBEAT": _HARDWARE,
    "ACL_ERROR_RT_MEMORY_ALLOCATION": _MEMORY, "ACL_ERROR_RT_DEVICE_OOM": _MEMORY,
    "ACL_ERROR_BAD_ALLOC": _MEMORY,
    "ACL_ERROR_RT_AICORE_EXCEPTION": _OPERATOR, "ACL_ERROR_RT_AICORE_TRAP_EXCEPTION": _OPERATOR,
    "ACL_ERROR_RT_AICPU_EXCEPTION": _OPERATOR, "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION": _OPERATOR,
    "ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION": _OPERATOR,
    "ACL_ERROR_RT_AICORE_TRAP_READ_OVERFLOW": _OPERATOR,
    "ACL_ERROR_RT_AICORE_TRAP_WRITE_OVERFLOW": _OPERATOR,
    "ACL_ERROR_RT_VECTOR_CORE_TRAP_READ_OVERFLOW": _OPERATOR,
    "ACL_ERROR_RT_VECTOR_CORE_TRAP_WRITE_OVERFLOW": _OPERATOR,
    "ACL_ERROR_RT_FFTS_PLUS_EXCEPTION": _OPERATOR, "ACL_ERROR_RT_FFTS_PLUS_TRAP_EXCEPTION": _OPERATOR,
    "ACL_ERROR_RT_AICORE_OVER_FLOW": _OPERATOR, "ACL_ERROR_RT_AIVEC_OVER_FLOW": _OPERATOR,
    "ACL_ERROR_RT_AICORE_TIMEOUT": _TIMEOUT, "ACL_ERROR_RT_AICPU_TIMEOUT": _TIMEOUT,
    "ACL_ERROR_RT_VECTOR_CORE_TIMEOUT": _TIMEOUT, "ACL_ERROR_RT_FFTS_PLUS_TIMEOUT": _TIMEOUT,
    "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT": _TIMEOUT, "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT": _TIMEOUT,
    "ACL_ERROR_RT_TASK_TIMEOUT": _TIMEOUT,
    "ACL_ERROR_RT_DEVICE_MEM_ERROR": _HARDWARE, "ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR": _HARDWARE,
    "ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR": _HARDWARE,
    "ACL_ERROR_RT_LINK_ERROR": _LINK, "ACL_ERROR_RT_SUSPECT_REMOTE_ERROR": _LINK,
    "ACL_ERROR_RT_COMM_OP_RETRY_FAIL": _LINK,
    "HCCL_E_TCP_CONNECT": _LINK, "HCCL_E_ROCE_CONNECT": _LINK, "HCCL_E_TCP_TRANSFER": _LINK,
    "HCCL_E_ROCE_TRANSFER": _LINK, "HCCL_E_TIMEOUT": _LINK, "HCCL_E_REMOTE": _LINK,
    "HCCL_E_NETWORK": _LINK,
    "HCCL_E_MEMORY": _HCCL_MEMORY, "HCCL_E_OOM": _HCCL_MEMORY,
    "HCCL_E_RUNTIME": _REACH, "HCCL_E_DRV": _REACH,
}
