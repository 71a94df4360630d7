"""A workspace per test: fake engines for every family, NVIDIA-shaped templates, and a runner
for ``mmgw trtllm-repo`` that returns the exit code and what it printed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.cli import main
from tests.server_repo.trtllm import fakes


@dataclass
class Workspace:
    root: Path
    backend: Path
    hf: Path
    llava_llm: Path
    llava_visual: Path
    onevision_llm: Path
    onevision_visual: Path
    mllama_llm: Path
    mllama_visual: Path
    whisper_encoder: Path
    whisper_decoder: Path
    assets: Path

    def args(self, family: str) -> list[str]:
        """The engine options a correct run for ``family`` passes."""
        out = ["--family", family, "--templates", str(self.backend)]
        out += ["--output", str(self.root / "repo" / family)]
        engines = {
            "llava": (self.llava_llm, self.llava_visual),
            "llava_onevision": (self.onevision_llm, self.onevision_visual),
            "mllama": (self.mllama_llm, self.mllama_visual),
        }
        if family == "whisper":
            out += ["--decoder-engine", str(self.whisper_decoder)]
            out += ["--encoder-engine", str(self.whisper_encoder)]
            out += ["--whisper-assets", str(self.assets)]
        else:
            llm, visual = engines[family]
            out += ["--llm-engine", str(llm), "--visual-engine", str(visual)]
            out += ["--tokenizer-dir", str(self.hf)]
        return out


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    engines = tmp_path / "engines"
    encoder, decoder = fakes.whisper_configs()
    onevision = fakes.llm_config(max_batch_size=1, max_prompt_embedding_table_size=7300)
    onevision = fakes.with_pretrained(onevision, architecture="Qwen2ForCausalLM")
    hf = tmp_path / "hf" / "llava-1.5-7b-hf"
    hf.mkdir(parents=True)
    (hf / "tokenizer.json").write_text("{}")
    assets = tmp_path / "whisper-assets"
    assets.mkdir()
    for name in ("multilingual.tiktoken", "mel_filters.npz"):
        (assets / name).write_bytes(b"x")
    return Workspace(
        root=tmp_path,
        backend=fakes.write_templates(tmp_path / "tensorrtllm_backend"),
        hf=hf,
        llava_llm=fakes.write_engine(engines / "llava" / "llm", fakes.llm_config()),
        llava_visual=fakes.write_engine(engines / "llava" / "visual", fakes.visual_config()),
        onevision_llm=fakes.write_engine(engines / "onevision" / "llm", onevision),
        onevision_visual=fakes.write_engine(
            engines / "onevision" / "visual", fakes.visual_config("llava_onevision", 16)
        ),
        mllama_llm=fakes.write_engine(engines / "mllama" / "llm", fakes.mllama_config()),
        mllama_visual=fakes.write_engine(
            engines / "mllama" / "visual", fakes.visual_config("mllama")
        ),
        whisper_encoder=fakes.write_engine(engines / "whisper" / "encoder", encoder),
        whisper_decoder=fakes.write_engine(engines / "whisper" / "decoder", decoder),
        assets=assets,
    )


Runner = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run_tool(capsys: pytest.CaptureFixture[str]) -> Runner:
    """``run_tool(*argv)`` -> (exit code, stdout, stderr) of ``mmgw trtllm-repo argv``."""

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(["trtllm-repo", *argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run
