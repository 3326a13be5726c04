"""Failures of a dependency or of a process at the other end of a pipe, told by their whole
shape: transformers' missing backend library (matcher/catalog/backend_libraries.py), MKL's
threading layer against GNU OpenMP, httpx's removed `proxies` (matcher/catalog/
removed_keywords.py), a transformers install holding files of two releases, and a bare
EOFError of a multiprocessing pipe (patterns/sglang/curated/families-deps.json,
families-processes.json).

Every line is as pasted in a public thread of the train split (URL beside it), cut from one
(tests/fixtures/processes/), or run here (tests/fixtures/transformers_install/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from generated_layer import engine_of, scan

from matcher.catalog import backend_libraries, removed_keywords
from matcher.engine import Engine

PROCESSES = Path(__file__).resolve().parent / "fixtures" / "processes"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return engine_of(tmp_path_factory.mktemp("curated"), ("mismatch.jsonl",))


def events(engine: Engine, text: str) -> list[dict]:
    slugs = {r.id: r.slug for r in engine.records}
    return [{**e, "slug": slugs[e["pattern_id"]]} for e in scan(engine, text) if e["pattern_id"]]


# https://github.com/ChasonShi/MELoRA/issues/4 (train)
SENTENCEPIECE = (
    "ImportError:\nLlamaTokenizer requires the SentencePiece library but it was not found in your "
    "environment. Checkout the instructions on the\ninstallation page of its repo: "
    "https://github.com/google/sentencepiece#installation and follow the ones\nthat match your "
    "environment. Please note that you may need to restart your runtime after installation.\n")
# https://github.com/intel/xFasterTransformer/issues/282 (train)
PROTOBUF = ("The new behaviour of LlamaTokenizer (with `self.legacy = False`) requires the protobuf "
            "library but it was not found in your environment.\n")


def test_a_missing_backend_library_is_told_what_to_install(engine: Engine) -> None:
    [event] = events(engine, SENTENCEPIECE)
    assert event["slug"] == "transformers-backend-library-missing"
    assert event["captures"] == {"library": "SentencePiece"}
    solutions = event["remediation"]["solutions"]
    assert solutions[0].endswith("pip install sentencepiece")
    assert event["remediation"]["fix_actions"][0] == [{"op": "install", "value": "sentencepiece"}]


def test_a_backend_message_in_words_names_its_library(engine: Engine) -> None:
    [event] = events(engine, PROTOBUF)
    assert event["slug"] == "transformers-backend-library-missing"
    assert event["remediation"]["solutions"][0].endswith("pip install protobuf")


@pytest.mark.parametrize(("library", "dist"), [
    ("PIL", "pillow"), ("🤗 Tokenizers", "tokenizers"), ("OpenCV", "opencv-python"),
    ("PyAv", "av"), ("jinja", "jinja2")])
def test_the_distribution_is_the_one_pypi_installs(library: str, dist: str) -> None:
    found = backend_libraries.answer(f"X requires the {library} library but it was not found in "
                                     "your environment.")
    assert found is not None and found.installs == (dist,)


def test_torch_is_installed_at_the_version_sglang_requires() -> None:
    found = backend_libraries.answer("AutoModel requires the PyTorch library but it was not found "
                                     "in your environment.")
    assert found is not None and found.installs == ()
    assert "m.requires('sglang')" in found.solutions[0]


def test_a_library_pip_cannot_install_alone_keeps_the_records_own_words() -> None:
    assert backend_libraries.answer("X requires the detectron2 library but it was not found in "
                                    "your environment.") is None


@pytest.mark.parametrize("text", [
    # https://github.com/allenai/rslearn_projects/pull/10 (train), CI timestamps as pasted
    ("2024-09-05T19:41:11.257738912Z Error: mkl-service + Intel(R) MKL: MKL_THREADING_LAYER=INTEL "
     "is incompatible with libgomp.so.1 library.\n2024-09-05T19:41:11.257764641Z \tTry to import "
     "numpy first or set the threading layer accordingly. Set MKL_SERVICE_FORCE_INTEL to force "
     "it.\n"),
    # https://github.com/THU-MIG/yolov10/issues/61 (train): torch's own copy of libgomp
    ("Error: mkl-service + Intel(R) MKL: MKL_THREADING_LAYER=INTEL is incompatible with "
     "libgomp-a34b3233.so.1 library.\n        Try to import numpy first or set the threading "
     "layer accordingly. Set MKL_SERVICE_FORCE_INTEL to force it.\n"),
])
def test_mkl_on_intel_openmp_next_to_libgomp_sets_the_gnu_layer(engine: Engine, text: str) -> None:
    [event] = events(engine, text)
    assert event["slug"] == "mkl-threading-layer-intel-with-libgomp"
    assert event["remediation"]["fix_actions"] == [
        [{"op": "env", "name": "MKL_THREADING_LAYER", "value": "GNU"}]]


# https://github.com/OpenBMB/ChatDev/issues/478 (train), as pasted
OPENAI_PROXIES = """\
Traceback (most recent call last):
  File "D:\\trae\\chatDev\\ChatDev-main\\ChatDev-main\\camel\\web_spider.py", line 12, in <module>
    client = openai.OpenAI(
  ^^^^^^^^^^^^^^^^^^^^^^^
  File "D:\\Program Files\\Python311\\Lib\\site-packages\\openai\\_base_client.py", line 745, in __init__
    super().__init__(**kwargs)
TypeError: Client.__init__() got an unexpected keyword argument 'proxies'
"""


def test_openais_client_under_httpx_0_28_is_told_to_upgrade_openai(engine: Engine) -> None:
    [event] = events(engine, OPENAI_PROXIES)
    solutions = event["remediation"]["solutions"]
    assert solutions[0] == ("Upgrade openai, whose releases from 1.55.3 on no longer pass "
                            "`proxies`: pip install -U 'openai>=1.55.3'")
    assert solutions[1].endswith("pip install 'httpx<0.28.0'")


def test_without_a_traceback_both_ways_are_given_and_openais_is_conditional() -> None:
    # https://github.com/wwbin2017/bailing/issues/37 (train): the line alone
    found = removed_keywords.answer("Client.__init__", "proxies", None)
    assert found is not None and found.installs == ("openai>=1.55.3", "httpx<0.28.0")
    assert found.solutions[0].startswith("If the traceback shows openai's client")


def test_another_caller_is_named_and_an_unknown_pair_is_left_alone() -> None:
    tb = 'File "/venv/lib/python3.11/site-packages/anthropic/_base_client.py", line 1334'
    found = removed_keywords.answer("AsyncClient.__init__", "proxies", tb)
    assert found is not None
    assert found.solutions[0].endswith("pip install -U anthropic")
    assert removed_keywords.answer("Client.__init__", "timeout_s", tb) is None
    # Python 3.9 prints `__init__()` alone: only a caller the table knows decides it
    assert removed_keywords.answer("__init__", "proxies", tb) is None


@pytest.mark.parametrize("name", ["rrn-3-manager-eoferror.log", "lucaone-29-ascend-tbe-eoferror.log"])
def test_a_bare_eoferror_of_a_pipe_is_the_other_process_exiting(engine: Engine, name: str) -> None:
    [event] = events(engine, (PROCESSES / name).read_text())
    assert event["slug"] == "multiprocessing-pipe-peer-exited"
    assert "dmesg" in event["remediation"]["solutions"][1]


LAUNCH = Path(__file__).resolve().parent / "fixtures" / "sglang" / "launch"


def test_an_eoferror_after_a_failure_joins_it(engine: Engine) -> None:
    # two real logs one after the other (a launch run here, then a pipe read after the other
    # process exited): the EOFError follows the failure and is attached to it
    text = ((LAUNCH / "unsupported_architecture.log").read_text()
            + (PROCESSES / "rrn-3-manager-eoferror.log").read_text())
    found = [e for e in events(engine, text) if e["slug"] == "multiprocessing-pipe-peer-exited"]
    assert found == []
    [cause] = [e for e in events(engine, text) if e["event"] == "sglang_error"]
    # the sigquit, then the EOFError (its message is empty)
    assert cause["slug"] == "transformers-backend-model-class-not-found"
    assert cause["consequences"] == [
        "Received sigquit from a child process. It usually means the child failed.", ""]


# https://github.com/mit-han-lab/smoothquant/issues/50 (train), as pasted
TORCH_CIRCLE = """\
Traceback (most recent call last):
  File "./generate_act_scales.py", line 7, in <module>
    import torch
  File "/opt/conda/envs/smoothquant/lib/python3.8/site-packages/torch/__init__.py", line 778, in <module>
    _C._initExtension(manager_path())
AttributeError: partially initialized module 'torch' has no attribute 'UntypedStorage' (most likely due to a circular import)
"""


def test_a_half_imported_installed_package_is_reinstalled_whole(engine: Engine) -> None:
    [event] = events(engine, TORCH_CIRCLE)
    assert event["slug"] == "dependency-version-mismatch-circular-attribute"
    assert event["remediation"]["solutions"][0].startswith(
        "Reinstall torch whole: pip install --force-reinstall --no-deps 'torch==")


def test_a_file_named_like_the_package_is_renamed() -> None:
    from matcher.catalog import unplaced

    # CPython 3.12's wording names the module's file (Objects/moduleobject.c)
    found = unplaced.circular(
        "partially initialized module 'torch' from '/home/me/proj/torch.py' has no attribute "
        "'cuda' (most likely due to a circular import)", None)
    assert found is not None and found.solutions[0].startswith("Rename /home/me/proj/torch.py")


# https://github.com/langchain-ai/executive-ai-assistant/issues/30 (train), as pasted
PIP_CONFLICTS = """\
ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. This behaviour is the source of the following dependency conflicts.
langgraph-api 0.2.56 requires langchain-core>=0.3.64, but you have langchain-core 0.3.63 which is incompatible.
langgraph-api 0.2.56 requires langgraph>=0.3.27, but you have langgraph 0.2.76 which is incompatible.
langgraph-api 0.2.56 requires langsmith>=0.3.45, but you have langsmith 0.2.11 which is incompatible.
"""


def test_each_requirement_pip_reports_unmet_gets_its_install(engine: Engine) -> None:
    found = events(engine, PIP_CONFLICTS)
    assert [e["slug"] for e in found] == ["pip-installed-requirement-not-met"] * 3
    assert [e["remediation"]["fix_actions"][0] for e in found] == [
        [{"op": "install", "value": "langchain-core>=0.3.64"}],
        [{"op": "install", "value": "langgraph>=0.3.27"}],
        [{"op": "install", "value": "langsmith>=0.3.45"}]]
    assert found[0]["remediation"]["solutions"][1].startswith("Or keep langchain-core 0.3.63")


def test_pips_older_wording_is_read_too() -> None:
    from matcher.catalog import pip_conflicts

    # https://github.com/pypa/pip/issues/5137 (train): pip 10's wording
    old = pip_conflicts.answer("botocore 1.9.21 has requirement python-dateutil<2.7.0,>=2.1, but "
                               "you'll have python-dateutil 2.7.2 which is incompatible.")
    assert old is not None and old.installs == ("python-dateutil<2.7.0,>=2.1",)


# A union of types (`X | Y`) evaluated by Python 3.8/3.9: as pasted in train threads.
PEP604_LINES = [
    # https://github.com/sgl-project/sglang/pull/940 (train)
    "TypeError: unsupported operand type(s) for |: '_GenericAlias' and 'NoneType'",
    # https://github.com/feder-cr/invisible_playwright_mcp/issues/7 (train)
    "TypeError: unsupported operand type(s) for |: 'type' and 'NoneType'",
    # https://github.com/langbot-app/LangBot/issues/895 (train)
    "TypeError: unsupported operand type(s) for |: '_UnionGenericAlias' and '_UnionGenericAlias'",
]


@pytest.mark.parametrize("line", PEP604_LINES)
def test_a_type_union_on_python_before_3_10_says_to_run_3_10(engine, line):
    (event,) = events(engine, line + "\n")
    assert event["slug"] == "pep604-union-on-old-python"
    assert "Python 3.10 or newer" in event["remediation"]["solutions"][0]


@pytest.mark.parametrize("line", [
    # both run here with Python 3.11: they fail on every Python, so they say nothing of its version
    "TypeError: unsupported operand type(s) for |: 'NoneType' and 'NoneType'",
    "TypeError: unsupported operand type(s) for |: 'type' and 'str'",
])
def test_a_union_that_fails_on_every_python_is_not_blamed_on_its_version(engine, line):
    assert all(e["slug"] != "pep604-union-on-old-python" for e in events(engine, line + "\n"))


TRANSFORMERS_INSTALL = Path(__file__).resolve().parent / "fixtures" / "transformers_install"


@pytest.mark.parametrize("text", [
    # run here: a transformers 4.57.1 file copied into a transformers 5.4.0 install
    (TRANSFORMERS_INSTALL / "leftover-4x-file-in-5x-run-here.log").read_text(),
    # https://github.com/huggingface/transformers/issues/42175 (train): `pip install '.[torch]'`
    "ValueError: Backend should be defined in the BACKENDS_MAPPING. Offending backend: tf\n",
])
def test_a_backend_the_installed_transformers_does_not_map_is_a_mixed_install(engine, text):
    (event,) = events(engine, text)
    assert event["slug"] == "transformers-install-mixes-releases-backend-unmapped"
    first = event["remediation"]["solutions"][0]
    assert first.startswith("Remove transformers completely and install one release")
