"""A library transformers needs and did not find, and the distribution that installs it.

transformers checks an optional dependency where a class needs it (`requires_backends`, the
dummy objects that stand in for classes of a missing backend) and raises ImportError with one
of its `*_IMPORT_ERROR` messages (`transformers/utils/import_utils.py`):

    LlamaTokenizer requires the SentencePiece library but it was not found in your environment.
    Check out the instructions on the installation page of its repo: …

The message names the library as people call it (`SentencePiece`, `PIL`, `🤗 Tokenizers`),
and several messages say no `pip install` at all, so what to install is a table: each library
name those messages print → its distribution on PyPI. Read from `BACKENDS_MAPPING` and the
`*_IMPORT_ERROR` constants of transformers 4.36.2, 4.57.0 and 5.19.0 (the backend key, and
the `pip install` the message states where it states one). Libraries that pip alone does not
install (detectron2, pytorch-quantization's NGC index, faiss's CPU/GPU builds, torch ccl's
Intel index) are left out: their message's own instructions stand. Pure.
"""

from __future__ import annotations

import re

from matcher.catalog.answer import Answer, requires

# the library's name as the message prints it → the distribution that installs it
DISTRIBUTION: dict[str, str] = {
    "SentencePiece": "sentencepiece",
    "protobuf": "protobuf",
    "🤗 Tokenizers": "tokenizers",
    "🤗 Datasets": "datasets",
    "PIL": "pillow",
    "Torchvision": "torchvision",
    "torchaudio": "torchaudio",
    "TorchCodec (https://github.com/pytorch/torchcodec)": "torchcodec",
    "accelerate": "accelerate",
    "timm": "timm",
    "OpenCV": "opencv-python",
    "PyAv": "av",
    "decord": "decord",
    "YT-DLP": "yt-dlp",
    "scipy": "scipy",
    "scikit-learn": "scikit-learn",
    "pandas": "pandas",
    "librosa": "librosa",
    "soundfile": "soundfile",
    "jinja": "jinja2",
    "rich": "rich",
    "peft": "peft",
    "diffusers": "diffusers",
    "pydantic": "pydantic",
    "fastapi": "fastapi",
    "uvicorn": "uvicorn",
    "openai": "openai",
    "Cython": "Cython",
    "Beautiful Soup": "beautifulsoup4",
    "NLTK": "nltk",
    "ftfy": "ftfy",
    "sacremoses": "sacremoses",
    "python-Levenshtein": "python-Levenshtein",
    "phonemizer": "phonemizer",
    "uroman": "uroman",
    "g2p-en": "g2p-en",
    "pyctcdecode": "pyctcdecode",
    "PyTesseract": "pytesseract",
    "pretty_midi": "pretty_midi",
    "natten": "natten",
    "jieba": "jieba",
    "rjieba": "rjieba",
}
# torch: sglang and its kernels are built for one torch release; a bare `pip install torch`
# would take the newest, which they are not built for
TORCH = "PyTorch"

# `{name} requires the {library} library but it was not found in your environment` (the
# library's name may follow a line break: `requires the\nlibrosa library`; `{name}` may be
# words: `The new behaviour of LlamaTokenizer (with `self.legacy = False`) requires the …`)
MESSAGE = re.compile(r"\brequires the\s+(?P<library>[^\n]+?)\s+library but it was not found in "
                     r"your environment")


def answer(message: str) -> Answer | None:
    """The install for each library a `requires_backends` message names (one message may join
    several), or None when it names none the table knows."""
    libraries = list(dict.fromkeys(m["library"] for m in MESSAGE.finditer(message)))
    if not libraries:
        return None
    solutions: list[str] = []
    installs: list[str] = []
    for library in libraries:
        if library == TORCH:
            solutions.append(
                "Install the torch your sglang requires (transformers found none importable): "
                f"{requires('sglang', 'torch')} prints it; pip install 'torch==<that version>' "
                "(from the CUDA index of your CUDA release for a GPU build)")
            continue
        dist = DISTRIBUTION.get(library)
        if dist is None:
            continue
        solutions.append(f"Install the {library} library transformers asks for: pip install {dist}")
        installs.append(dist)
    if not solutions:
        return None
    names = ", ".join(libraries)
    doc = (f"transformers needs {names} for this class and could not import it: the "
           "distribution is not installed in the Python that runs sglang (or its import fails).")
    return Answer(doc, tuple(solutions), tuple(installs))
