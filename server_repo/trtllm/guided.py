"""``--guided-decoding``: what TensorRT-LLM needs for structured output, written and wired.

Three pieces, each from NVIDIA's own files:

- ``tensorrt_llm``'s parameters ``guided_decoding_backend`` ("Set to ``xgrammar`` to
  activate guided decoder", tensorrtllm_backend ``docs/model_config.md``) and
  ``xgrammar_tokenizer_info_path``, the JSON file the C++ backend builds xgrammar's tokenizer
  from ("Guided decoding C++ workflow does not use tokenizer_dir", ``docs/guided_decoding.md``).
  The file is what TensorRT-LLM's ``examples/generate_xgrammar_tokenizer_info.py`` writes
  (``tensorrt_llm/llmapi/tokenizer.py`` ``_xgrammar_tokenizer_info``): ``encoded_vocab`` (the
  token strings ordered by id), ``tokenizer_str`` (the fast tokenizer's ``tokenizer.json``)
  and ``stop_token_ids`` (``[eos_token_id]``). It is made here from the tokenizer folder with
  the ``tokenizers`` library alone; ``tokenizer_dir`` is set too, for the Python backend.
- The multimodal ``ensemble`` (``all_models/multimodal/ensemble``) declares neither guide
  input, and Triton refuses an input a model does not declare: both are added to its input
  list (optional, ``TYPE_STRING`` ``[1]``, as ``tensorrt_llm`` declares them) and to the
  ``tensorrt_llm`` step's ``input_map``.
- ``tensorrt_llm_bls`` forwards both in NVIDIA's current templates; an older one that does
  not declare them is refused when it is the entry model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from google.protobuf import text_format
from tokenizers import Tokenizer
from tritonclient.grpc import model_config_pb2

from server_repo.trtllm.errors import EngineError, TemplateError
from server_repo.trtllm.verify import parse_config

TOKENIZER_INFO_FILE = "xgrammar_tokenizer_info.json"
GUIDE_INPUTS = ("guided_decoding_guide_type", "guided_decoding_guide")
BACKEND = "xgrammar"


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        found = json.loads(path.read_text())
    except ValueError as exc:
        raise EngineError(f"{path}: not valid JSON ({exc})") from exc
    return found if isinstance(found, dict) else {}


def _token_text(entry: object) -> str | None:
    """``eos_token`` as ``tokenizer_config.json`` spells it: a string or ``{"content": ...}``."""
    if isinstance(entry, dict):
        entry = entry.get("content")
    return entry if isinstance(entry, str) else None


def _eos_id(tokenizer_dir: Path, tokenizer: Tokenizer, vocab: dict[str, int]) -> int:
    """The EOS id as Hugging Face reads it: ``tokenizer_config.json``'s ``eos_token``, else the
    model config's ``eos_token_id`` (``generation_config.json``, then ``config.json``)."""
    eos = _token_text(_read_json(tokenizer_dir / "tokenizer_config.json").get("eos_token"))
    if eos is not None and eos in vocab:
        return vocab[eos]
    for name in ("generation_config.json", "config.json"):
        found = _read_json(tokenizer_dir / name).get("eos_token_id")
        if isinstance(found, list) and found:
            found = found[0]
        if isinstance(found, int):
            return found
    raise EngineError(
        f"--guided-decoding: no EOS token in {tokenizer_dir} (tokenizer_config.json eos_token "
        "or config.json eos_token_id); xgrammar needs it to end a grammar"
    )


def tokenizer_info(tokenizer_dir: Path) -> dict[str, Any]:
    """``xgrammar_tokenizer_info.json``'s content for a Hugging Face tokenizer folder."""
    path = tokenizer_dir / "tokenizer.json"
    if not path.is_file():
        raise EngineError(
            f"--guided-decoding needs {path}: xgrammar's tokenizer info is made from a fast "
            "tokenizer (save one with transformers' AutoTokenizer.save_pretrained, or run "
            "TensorRT-LLM's examples/generate_xgrammar_tokenizer_info.py yourself)"
        )
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust library raises plain Exception for a bad file
        raise EngineError(f"{path}: not a tokenizers file ({exc})") from exc
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    added = _read_json(tokenizer_dir / "tokenizer_config.json").get("added_tokens_decoder", {})
    for token_id, entry in added.items() if isinstance(added, dict) else ():
        text = _token_text(entry)
        if text is not None and str(token_id).isdigit():
            vocab.setdefault(text, int(token_id))
    return {
        "encoded_vocab": [token for token, _ in sorted(vocab.items(), key=lambda kv: kv[1])],
        "tokenizer_str": tokenizer.to_str(),
        "stop_token_ids": [_eos_id(tokenizer_dir, tokenizer, vocab)],
    }


def _declares(config: model_config_pb2.ModelConfig) -> set[str]:
    return {tensor.name for tensor in config.input} & set(GUIDE_INPUTS)


def wire_ensemble(path: Path) -> None:
    """Declare the guide inputs in the ensemble at ``path`` and map them to ``tensorrt_llm``.

    The config is re-written from its parsed form (comments do not survive; every value
    does), and inputs or mappings already there are left as they are.
    """
    config = text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())
    steps = [s for s in config.ensemble_scheduling.step if s.model_name == "tensorrt_llm"]
    if len(steps) != 1:
        raise TemplateError(f"{path}: expected one tensorrt_llm step, found {len(steps)}")
    declared = _declares(config)
    for name in GUIDE_INPUTS:
        if name not in declared:
            tensor = config.input.add(name=name, data_type=model_config_pb2.TYPE_STRING)
            tensor.dims.append(1)
            tensor.optional = True
        steps[0].input_map.setdefault(name, name)
    path.write_text(text_format.MessageToString(config))


def check_repository(repo: Path, entry: str, info_path: Path) -> list[str]:
    """Re-read what ``--guided-decoding`` wrote; refuse what would not carry the guide.

    Returns notes for the user (a BLS that cannot forward the guide, when it is not the
    entry model).
    """
    llm_path = repo / "tensorrt_llm" / "config.pbtxt"
    llm = parse_config(llm_path)
    for key, wanted in (("guided_decoding_backend", BACKEND),
                        ("xgrammar_tokenizer_info_path", str(info_path))):  # fmt: skip
        found = llm.parameters[key].string_value if key in llm.parameters else None
        if found is None:
            raise TemplateError(
                f"{llm_path}: no parameter {key!r}: this tensorrtllm_backend predates guided "
                "decoding; use a newer one for --guided-decoding"
            )
        if found != wanted:
            raise TemplateError(f"{llm_path}: parameter {key} is {found!r}, expected {wanted!r}")
    if _declares(llm) != set(GUIDE_INPUTS):
        raise TemplateError(f"{llm_path}: does not declare {', '.join(GUIDE_INPUTS)}")
    _check_ensemble(repo / "ensemble" / "config.pbtxt")
    info = json.loads((repo / "tensorrt_llm" / TOKENIZER_INFO_FILE).read_text())
    if not (info.get("encoded_vocab") and info.get("stop_token_ids")):
        raise TemplateError(f"{TOKENIZER_INFO_FILE}: empty vocabulary or stop tokens")
    bls_path = repo / "tensorrt_llm_bls" / "config.pbtxt"
    if bls_path.is_file() and _declares(parse_config(bls_path)) != set(GUIDE_INPUTS):
        message = f"{bls_path}: this tensorrt_llm_bls does not take the guide inputs"
        if entry == "bls":
            raise TemplateError(f"{message}; use a newer tensorrtllm_backend or --entry ensemble")
        return [f"{message} (the ensemble does; call that)"]
    return []


def _check_ensemble(path: Path) -> None:
    config = parse_config(path)
    declared = {t.name: t for t in config.input}
    step = next(s for s in config.ensemble_scheduling.step if s.model_name == "tensorrt_llm")
    for name in GUIDE_INPUTS:
        tensor = declared.get(name)
        if tensor is None or tensor.data_type != model_config_pb2.TYPE_STRING:
            raise TemplateError(f"{path}: {name} is not declared as TYPE_STRING")
        if step.input_map.get(name) != name:
            raise TemplateError(f"{path}: the tensorrt_llm step does not map {name}")
