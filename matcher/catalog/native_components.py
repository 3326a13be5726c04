"""What to do about a glog line of Mooncake, the KV-cache transfer engine and store sglang's PD
disaggregation and HiCache use: the answer to the glog family records of `matcher.catalog.native`
(`E0529 23:22:59.553362 67580 rdma_context.cpp:203] Failed to register memory …`), which say
where a line was logged but not what to do.

Two closed vocabularies of Mooncake (github.com/kvcache-ai/Mooncake) decide it:

- the source files of its RDMA transport, named for it (`mooncake-transfer-engine/src/transport/
  rdma_transport/rdma_{context,endpoint,transport}.cpp`, `tent/src/transport/rdma/
  {rdma_transport,gdr_reachability}.cpp`): every error they log is an RDMA device that could not
  be opened or set up, memory that could not be registered with it (GPU memory through
  `ibv_reg_mr` and a peer-memory module, or exported as dma-buf: `rdma_context.cpp`), or a
  connection over it that failed — the same checks answer them all;
- the error codes of Mooncake Store (`ErrorCode` in `mooncake-store/include/types.h`, printed
  by name, `types.cpp`) that say where the failure is: `RPC_FAIL`/`RPC_TIMEOUT`, the store
  client lost its `mooncake_master`. (`TRANSFER_FAIL` is left out: the transfer engine's own
  lines before it say why, and that may be a fault of Mooncake's rather than the setup's.)

Files with generic names (`context.cpp`, `client.cpp`) are left out: other C++ libraries log
glog lines from files of those names. `matcher.pipeline.vocabulary_answered` puts the answer
ahead of the record's own words; nothing is read from disk.
"""

from __future__ import annotations

import re

from matcher.catalog.answer import Said, answered_by

_RDMA_FILES = re.compile(r"(?:^|/)(?:rdma_context|rdma_endpoint|rdma_transport|gdr_reachability)"
                         r"\.cpp$")
_RDMA = (
    "Mooncake's RDMA transport could not use an RDMA device (open it, register memory with it, "
    "or connect over it). Check the RDMA path where sglang runs: `ibv_devices` must list the "
    "devices inside the container or pod (mount `/dev/infiniband`, run privileged or with "
    "IPC_LOCK and `ulimit -l unlimited`), the devices given with `--disaggregation-ib-device` "
    "(or the Mooncake config's `device_name`) must be among them with ports ACTIVE (`ibstat`). "
    "`Failed to register memory …: Bad address [14]` is GPU memory the NIC could not map: "
    "Mooncake registers it with `ibv_reg_mr` in older releases and with `WITH_NVIDIA_PEERMEM=1`, "
    "which needs the GPU's peer-memory module loaded (`lsmod | grep nvidia_peermem`; amdgpu's "
    "on AMD), and newer releases export it as dma-buf, which needs a kernel and NIC driver "
    "with dma-buf support")

_STORE_CODES = (
    (re.compile(r"\bRPC_(?:FAIL|TIMEOUT)\b"),
     ("Mooncake Store's client lost its master (RPC_FAIL/RPC_TIMEOUT): check that "
      "`mooncake_master` is running and reachable from this node at the master address sglang "
      "was given (`MOONCAKE_MASTER` or the config's `master_server_address`), and that nothing "
      "between them (a firewall, a pod network policy) drops the connection")),
)


def answer(file: str, message: str) -> str | None:
    """What to do about a Mooncake glog line logged in `file` with `message`, if it is one of
    the vocabularies'."""
    if _RDMA_FILES.search(file):
        return _RDMA
    for code, what_to_do in _STORE_CODES:
        if code.search(message):
            return what_to_do
    return None



def said(captures: dict[str, str]) -> Said:
    what_to_do = answer(captures.get("file") or "", captures.get("message") or "")
    return None if what_to_do is None else ("", what_to_do)


remediation = answered_by(said)  # what to do about a Mooncake line ahead of the record's words
