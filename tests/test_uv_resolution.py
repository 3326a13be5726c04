"""uv's `Because …, we can conclude that` sentence: the clash it names and the way out, read
per event (matcher/catalog/uv_resolution.py), on lines pasted in train-split threads."""

from __future__ import annotations

from matcher.catalog import uv_resolution

# https://github.com/ChenmienTan/RL2/issues/5 (train): `uv pip install -e .` of a project that
# pins sglang[all]==0.4.6.post3 and transformers==4.51.2 (uv wrapped the sentence after `are`)
RL2 = ("  ╰─▶ Because sglang[all]==0.4.6.post3 depends on transformers==4.51.1 and rl2==0.1.0 "
       "depends on transformers==4.51.2, we can conclude that rl2==0.1.0 and "
       "sglang[all]==0.4.6.post3 are")
# https://github.com/allenai/olmocr/issues/245 (train): sglang 0.4.2 pins `flashinfer`, which
# PyPI does not serve
OLMOCR = ("  ╰─▶ Because flashinfer was not found in the package registry and sglang[all]==0.4.2 "
          "depends on flashinfer==0.1.6, we can conclude that sglang[all]==0.4.2 cannot be used.")
# https://github.com/Tencent-Hunyuan/UniRL/issues/116 (train): the chain's first step, not the
# clash (unirl[sglang] depends on sglang[diffusion] itself)
UNIRL = ("  ╰─▶ Because sglang[diffusion]==0.5.12.post1 depends on diffusers==0.37.0 and "
         "unirl[sglang]==0.1.0 depends on sglang[diffusion]==0.5.12.post1, we can conclude that")


def test_two_pins_of_one_package_name_both_and_the_pin_to_take() -> None:
    got = uv_resolution.answer(RL2)
    assert got is not None
    assert "sglang[all]==0.4.6.post3 requires transformers==4.51.1" in got.documentation
    assert "rl2==0.1.0 requires transformers==4.51.2" in got.documentation
    assert "require transformers as sglang[all]==0.4.6.post3 does (transformers==4.51.1)" \
        in got.solutions[0]
    assert "separate environments" in got.solutions[1]
    assert got.installs == ()


def test_a_package_no_index_has_names_it_and_its_requirer() -> None:
    got = uv_resolution.answer(OLMOCR)
    assert got is not None
    assert got.documentation.startswith("sglang[all]==0.4.2 requires flashinfer==0.1.6, and no "
                                        "package flashinfer is on the indexes uv reads")
    assert "`pip index versions flashinfer`" in got.solutions[0]
    assert "a release of sglang that requires" in got.solutions[0]


def test_a_step_of_the_chain_is_not_answered() -> None:
    assert uv_resolution.answer(UNIRL) is None


def test_other_sentences_are_not_answered() -> None:
    # the chain's next step (lower-case `because`) and uv's own `there is no version` form
    assert uv_resolution.answer("      And because rl2==0.1.0 depends on sglang[all]==0.4.6.post3,"
                                " we can conclude that rl2==0.1.0 cannot be used.") is None
    assert uv_resolution.answer("  ╰─▶ Because there is no version of urllib3==0.0.99 and you "
                                "require") is None
    # one package named twice is no clash of two
    assert uv_resolution.answer("Because a==1 depends on p==1 and a==2 depends on p==2, we can "
                                "conclude that") is None
