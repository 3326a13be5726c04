"""A `KeyError: 'key'` is only its key: what the key is tells which lookup failed.

- A Hugging Face model type (`matcher.catalog.model_types`: transformers' and sglang's
  configuration registries, a closed vocabulary) is the lookup of config.json's `model_type`:
  an event of `transformers-config-mapping-unknown-model-type`, with the transformers (or
  sglang) release that knows the type.
- A checkpoint tensor's dotted name (`matcher.catalog.tensor_names`) is weight loading's lookup
  of a parameter: an event of `weight-name-not-in-model`, with the way out the name points at
  (a LoRA, quantization or vision-tower tensor) ahead of the record's own.
- A key of PEFT's LoRA `adapter_config.json` or of a Hugging Face processor's output
  (`matcher.catalog.lookup_keys`) is sglang's read of an adapter's config or of the features
  the processor returned: an event of `lora-adapter-config-key-missing` or
  `multimodal-processor-output-key-missing`, with words naming the key. sglang's
  `Failed to load LoRA adapter NAME: '<key>'` gets the adapter-config words too.

The curated records match these KeyErrors where the traceback shows their frame (or, for the
weight records of a layer's parameter or the lm_head, by their message); a bare line — no
traceback, as users paste it — is an unknown exception to the engine and is made an event of
the record here. Events the records already have get the same per-event answer. A model type,
adapter-config or processor key whose traceback shows a raising frame keeps its own event: the
key was looked up elsewhere. A tensor's dotted name is weight loading's lookup also where the
pasted traceback shows frames but none of sglang's — a framework's weight sync (verl, slime)
relaying sglang's error, a cut paste — except another inference engine's (vLLM's
`load_weights`: that engine's model class lacks the name, and the record's words are sglang's).
At a frame of sglang's that no weight record names, the name was looked up elsewhere (sglang's
W8A8 config reads `quant_description[prefix + ".weight"]`) and the event stays unknown.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from matcher.catalog.schema import CatalogRecord
from matcher.types import Event

MODEL_TYPE_RECORD = "13341680e05abeb3"  # transformers-config-mapping-unknown-model-type
WEIGHT_NAME_RECORD = "7384eab5e1c0de1d"  # weight-name-not-in-model
# the records of weight loading's KeyError, each matched on its own shape of name
WEIGHT_RECORDS = frozenset({WEIGHT_NAME_RECORD, "5858185d1080ed30", "e4aa337a710dab7e"})
# sglang's `Failed to load LoRA adapter {name}: {error}`, the error a KeyError's quoted key
LORA_ADAPTER_RECORD = "3fcf311a16e852e1"
_ADAPTER_KEY = re.compile(r"Failed to load LoRA adapter .+?: '(?P<key>[^'\s]+)'$")
# kinds of name the layer-parameter record's own words (quantization first) do not cover
_OWN_WORDS_MISS = frozenset({"lora", "tower"})

Remedy = Callable[[dict[str, Any]], dict[str, Any]]  # an event's remediation → the answered one
_KEY = re.compile(r"^(?:[\w.]+\.)?KeyError: '(?P<key>[^'\s]+)'$")
# the packages of other inference engines, whose weight loaders raise the same KeyError
_OTHER_ENGINE = re.compile(r"(?:^|/)(?:vllm|vllm_ascend|lmdeploy|tensorrt_llm)/")


def answered(events: list[Event], record_of: Callable[[str], CatalogRecord | None]
             ) -> list[Event]:
    """`events` with each bare unknown KeyError on a model type or tensor name made an event
    of its record, and the events of those records given what their key says."""
    out = events
    for i, e in enumerate(events):
        if e.pattern_id == LORA_ADAPTER_RECORD:
            made = _lora_adapter(e, record_of)
        elif e.error_class.rsplit(".", 1)[-1] == "KeyError":
            made = _answered(e, record_of)
        else:
            continue
        if made is not None:
            if out is events:
                out = list(events)
            out[i] = made
    return out


def _answered(e: Event, record_of: Callable[[str], CatalogRecord | None]) -> Event | None:
    from matcher.catalog import model_types, tensor_names

    key = key_of(e.message)
    if key is None:
        return None
    unknown = e.event == "sglang_unknown_error"
    bare = unknown and e.raised_at is None and not _has_frames(e)
    if (bare or e.pattern_id == MODEL_TYPE_RECORD) and model_types.is_model_type(key):
        answer = model_types.remedy(key, e.sglang_version)
        return made(e, record_of(MODEL_TYPE_RECORD), answer.remediation if answer else None,
                     {"model_type": key})
    if ((unknown and _no_engines_frame(e)) or e.pattern_id in WEIGHT_RECORDS) \
            and tensor_names.is_tensor_name(key):
        own = e.pattern_id if e.pattern_id in WEIGHT_RECORDS else WEIGHT_NAME_RECORD
        words = tensor_names.solution(key)
        if own != WEIGHT_NAME_RECORD and tensor_names.kind(key) not in _OWN_WORDS_MISS:
            words = None  # the layer-parameter and lm_head records say it themselves
        elif words is None and own == WEIGHT_NAME_RECORD and not tensor_names.is_draft_head(key):
            words = tensor_names.layout_solution(key)  # the record's first is a draft head's
        return made(e, record_of(own),
                    (lambda base: first_solution(words, base)) if words else None,
                    {"param_name": key})
    return _looked_up(e, key, bare, record_of)


def _looked_up(e: Event, key: str, bare: bool,
               record_of: Callable[[str], CatalogRecord | None]) -> Event | None:
    """A KeyError on an adapter-config or processor-output key: bare, or already an event of
    that key's record (matched at its frame)."""
    from matcher.catalog import lookup_keys

    found = lookup_keys.lookup(key, bare=bare)
    if found is None or not (bare or e.pattern_id == found[0]):
        return None
    record, words = found
    capture = "config_key" if record == lookup_keys.LORA_CONFIG_RECORD else "output_key"
    # the words name the key where the record's first solution speaks of any key
    return made(e, record_of(record),
                lambda base: first_solution(
                    words, {**base, "solutions": (base.get("solutions") or [])[1:]}),
                {capture: key})


def _lora_adapter(e: Event, record_of: Callable[[str], CatalogRecord | None]) -> Event | None:
    """An event of `Failed to load LoRA adapter NAME: '<key>'` (the loader's KeyError, in
    words) given what the key says: a LoRA tensor's name, or a field of adapter_config.json."""
    from matcher.catalog import lookup_keys, tensor_names

    m = _ADAPTER_KEY.search(e.message)
    if m is None:
        return None
    if m["key"] in lookup_keys.LORA_CONFIG_KEYS:
        words = lookup_keys.lora_config_words(m["key"])
    elif tensor_names.kind(m["key"]) == tensor_names.LORA:
        words = tensor_names.solution(m["key"]) or ""
    else:
        return None
    return made(e, record_of(LORA_ADAPTER_RECORD), lambda base: first_solution(words, base), {})


def made(e: Event, record: CatalogRecord | None, remedy: Remedy | None,
         captures: dict[str, str]) -> Event | None:
    if record is None:
        return None
    if e.pattern_id == record.id:
        if remedy is None:
            return None
        return dataclasses.replace(e, remediation=remedy(e.remediation or record.remediation()))
    base = record.remediation()
    return dataclasses.replace(
        e, event="sglang_error", pattern_id=record.id, severity=record.severity,
        role=record.role, captures=captures, remediation=remedy(base) if remedy else base,
        fingerprint=None)


def first_solution(words: str, base: dict[str, Any]) -> dict[str, Any]:
    """`base` with `words` as its first solution; its steps (`fix_actions`, which follow the
    record's own first solution) are left out, and its example, as they are for a different
    way out."""
    out = {k: v for k, v in base.items() if k != "fix_actions"}
    out["example_fix"] = None  # the record's example shows its own first solution
    out["solutions"] = [words, *(s for s in base.get("solutions") or () if s != words)]
    return out


def key_of(message: str) -> str | None:
    """The key of a `KeyError: '…'` message (a string key without quotes or spaces in it)."""
    m = _KEY.match(message.strip())
    return m.group("key") if m else None


def _no_engines_frame(e: Event) -> bool:
    """The traceback shows no frame of sglang's (the raising frame is sglang's innermost when
    it has one: an unknown there is a lookup no weight record names, such as a quantization
    description's `quant_description[prefix + ".weight"]`) nor of another inference engine's
    (vLLM's `load_weights`: its model classes, not sglang's, lack the name)."""
    at = e.raised_at
    return at is None or not (at.path.startswith("sglang/") or _OTHER_ENGINE.search(at.path))


def _has_frames(e: Event) -> bool:
    return bool(e.traceback) and 'File "' in (e.traceback or "")
