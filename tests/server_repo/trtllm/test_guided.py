"""``mmgw trtllm-repo --guided-decoding``: xgrammar switched on, its tokenizer info written from
the tokenizer folder, and the guide inputs carried through the multimodal ensemble."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import text_format
from tokenizers import Tokenizer
from transformers import AutoTokenizer
from tritonclient.grpc import model_config_pb2

from server_repo.reference_kit.tiny_tokenizer import SpecialTokens, build_hf_tokenizer
from server_repo.trtllm.guided import GUIDE_INPUTS
from tests.server_repo.trtllm import fakes
from tests.server_repo.trtllm.conftest import Runner, Workspace

SPECIAL = SpecialTokens(
    bos="<s>", eos="</s>", unk="<unk>", pad="<pad>", extra=("<image>",), add_bos=True
)


@pytest.fixture
def tokenizer_dir(workspace: Workspace) -> Path:
    """A real fast tokenizer (the reference kit's tiny byte-level BPE) in the --tokenizer-dir."""
    (workspace.hf / "tokenizer.json").unlink()
    build_hf_tokenizer(SPECIAL).save_pretrained(workspace.hf)
    return workspace.hf


def parse(repo: Path, model: str) -> model_config_pb2.ModelConfig:
    text = (repo / model / "config.pbtxt").read_text()
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def _inputs(config: model_config_pb2.ModelConfig) -> dict[str, model_config_pb2.ModelInput]:
    return {tensor.name: tensor for tensor in config.input}


def _llm_step(config: model_config_pb2.ModelConfig) -> model_config_pb2.ModelEnsembling.Step:
    return next(s for s in config.ensemble_scheduling.step if s.model_name == "tensorrt_llm")


def test_guided_decoding_is_written_and_wired(
    workspace: Workspace, run_tool: Runner, tokenizer_dir: Path
) -> None:
    code, _, err = run_tool(*workspace.args("llava"), "--guided-decoding")
    assert code == 0, err
    repo = workspace.root / "repo" / "llava"
    llm = parse(repo, "tensorrt_llm")
    info_path = repo / "tensorrt_llm" / "xgrammar_tokenizer_info.json"
    params = {key: llm.parameters[key].string_value for key in llm.parameters}
    assert params["guided_decoding_backend"] == "xgrammar"
    assert params["xgrammar_tokenizer_info_path"] == str(info_path)
    assert params["tokenizer_dir"] == str(tokenizer_dir)
    # The file TensorRT-LLM's generate_xgrammar_tokenizer_info.py writes, computed here with
    # transformers as its _xgrammar_tokenizer_info does.
    reference = AutoTokenizer.from_pretrained(tokenizer_dir)
    info = json.loads(info_path.read_text())
    assert set(info) == {"encoded_vocab", "tokenizer_str", "stop_token_ids"}
    vocab = reference.get_vocab()
    assert info["encoded_vocab"] == [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    assert info["stop_token_ids"] == [reference.eos_token_id]
    restored = Tokenizer.from_str(info["tokenizer_str"])
    assert restored.encode("What is this?").ids == reference("What is this?")["input_ids"]
    ensemble = parse(repo, "ensemble")
    declared = _inputs(ensemble)
    for name in GUIDE_INPUTS:
        assert declared[name].data_type == model_config_pb2.TYPE_STRING
        assert list(declared[name].dims) == [1] and declared[name].optional
        assert _llm_step(ensemble).input_map[name] == name
    steps = [s.model_name for s in ensemble.ensemble_scheduling.step]
    assert steps == ["preprocessing", "multimodal_encoders", "tensorrt_llm", "postprocessing"]
    assert _llm_step(ensemble).input_map["input_ids"] == "_INPUT_ID"  # the rest kept


def test_without_the_flag_nothing_changes(workspace: Workspace, run_tool: Runner) -> None:
    code, _, err = run_tool(*workspace.args("llava"))
    assert code == 0, err
    repo = workspace.root / "repo" / "llava"
    llm = parse(repo, "tensorrt_llm")
    assert llm.parameters["guided_decoding_backend"].string_value == "${guided_decoding_backend}"
    assert not (repo / "tensorrt_llm" / "xgrammar_tokenizer_info.json").exists()
    assert not set(GUIDE_INPUTS) & set(_inputs(parse(repo, "ensemble")))


def test_path_map_applies_to_the_tokenizer_info(
    workspace: Workspace, run_tool: Runner, tokenizer_dir: Path
) -> None:
    mapping = f"{workspace.root}=/models"
    code, _, err = run_tool(*workspace.args("llava"), "--guided-decoding", "--path-map", mapping)
    assert code == 0, err
    llm = parse(workspace.root / "repo" / "llava", "tensorrt_llm")
    path = llm.parameters["xgrammar_tokenizer_info_path"].string_value
    assert path == "/models/repo/llava/tensorrt_llm/xgrammar_tokenizer_info.json"


def test_inputs_the_ensemble_already_declares_are_kept_once(
    workspace: Workspace, run_tool: Runner, tokenizer_dir: Path
) -> None:
    newer = fakes.ENSEMBLE.replace(
        "input [\n", "input [\n" + ",\n".join(fakes.GUIDE_INPUTS) + ",\n", 1
    ).replace(
        '      input_map { key: "input_ids" value: "_INPUT_ID" }\n',
        '      input_map { key: "input_ids" value: "_INPUT_ID" }\n'
        '      input_map { key: "guided_decoding_guide" value: "guided_decoding_guide" }\n',
    )
    fakes.write_templates(workspace.backend, {"multimodal/ensemble": newer})
    code, _, err = run_tool(*workspace.args("llava"), "--guided-decoding")
    assert code == 0, err
    ensemble = parse(workspace.root / "repo" / "llava", "ensemble")
    names = [tensor.name for tensor in ensemble.input]
    assert all(names.count(name) == 1 for name in GUIDE_INPUTS)
    assert set(GUIDE_INPUTS) <= set(_llm_step(ensemble).input_map)


def test_a_missing_tokenizer_file_is_refused(workspace: Workspace, run_tool: Runner) -> None:
    (workspace.hf / "tokenizer.json").unlink()
    code, _, err = run_tool(*workspace.args("llava"), "--guided-decoding")
    assert code == 2 and "tokenizer.json" in err and "--guided-decoding" in err
    assert not (workspace.root / "repo" / "llava").exists()


def test_a_tokenizer_without_eos_is_refused(
    workspace: Workspace, run_tool: Runner, tokenizer_dir: Path
) -> None:
    config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())
    config.pop("eos_token", None)
    (tokenizer_dir / "tokenizer_config.json").write_text(json.dumps(config))
    code, _, err = run_tool(*workspace.args("llava"), "--guided-decoding")
    assert code == 2 and "EOS" in err


def test_a_backend_older_than_guided_decoding_is_refused(
    workspace: Workspace, run_tool: Runner, tokenizer_dir: Path
) -> None:
    old = fakes.TENSORRT_LLM.replace("xgrammar_tokenizer_info_path", "unrelated_key")
    fakes.write_templates(workspace.backend, {"inflight_batcher_llm/tensorrt_llm": old})
    code, _, err = run_tool(*workspace.args("llava"), "--guided-decoding")
    assert code == 2 and "xgrammar_tokenizer_info_path" in err and "predates" in err


def test_a_bls_without_the_guide_inputs(
    workspace: Workspace, run_tool: Runner, tokenizer_dir: Path
) -> None:
    old_bls = fakes.BLS
    for tensor in fakes.GUIDE_INPUTS:
        old_bls = old_bls.replace(",\n" + tensor, "")
    fakes.write_templates(workspace.backend, {"inflight_batcher_llm/tensorrt_llm_bls": old_bls})
    code, _, err = run_tool(*workspace.args("llava"), "--guided-decoding", "--entry", "bls")
    assert code == 2 and "tensorrt_llm_bls does not take the guide inputs" in err
    code, out, err = run_tool(*workspace.args("llava"), "--guided-decoding")
    assert code == 0, err
    assert "tensorrt_llm_bls does not take the guide inputs" in out


def test_whisper_refuses_guided_decoding(workspace: Workspace, run_tool: Runner) -> None:
    code, _, err = run_tool(*workspace.args("whisper"), "--guided-decoding")
    assert code == 2 and "--guided-decoding" in err and "whisper_bls" in err
