"""The engine-build recipes: they parse, they emit NVIDIA's flags with computed budgets, and
engines built the way they say pass ``mmgw trtllm-repo``'s checks (recipe and tool agree)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from server_repo.trtllm.families import SUPPORTED_FAMILIES
from tests.server_repo.trtllm import fakes

ENGINES = Path(__file__).resolve().parents[2] / "deploy" / "engines"
RECIPES = sorted(p for p in ENGINES.glob("*.sh") if not p.name.startswith("_"))


def dry_run(recipe: str, **env: str) -> tuple[list[list[str]], list[str]]:
    """(commands as argv lists, comment lines) printed by ``DRY_RUN=1 bash recipe``."""
    variables = {"MODEL_DIR": "/models/m", "OUTPUT_DIR": "/engines/m", "VILA_PATH": "/src/VILA"}
    result = subprocess.run(
        ["bash", str(ENGINES / f"{recipe}.sh")],
        env={"PATH": os.environ["PATH"], "DRY_RUN": "1", **variables, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    commands = [shlex.split(line) for line in lines if line and not line.startswith("#")]
    return commands, [line for line in lines if line.startswith("#")]


def flags(argv: list[str]) -> dict[str, str]:
    return {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}


def test_every_family_has_a_recipe() -> None:
    assert {p.stem for p in RECIPES} == set(SUPPORTED_FAMILIES)


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_recipes_parse(recipe: Path) -> None:
    subprocess.run(["bash", "-n", str(recipe)], check=True, timeout=30)


@pytest.mark.parametrize(
    ("family", "batch", "images", "visual_batch"),
    [("llava", 8, 1, 8), ("llava", 4, 2, 8), ("vila", 8, 4, 32), ("llava_onevision", 1, 1, 16)],
)
def test_prompt_table_recipes_compute_max_multimodal_len(
    family: str, batch: int, images: int, visual_batch: int
) -> None:
    commands, _ = dry_run(family, MAX_BATCH=str(batch), MAX_IMAGES=str(images), TP_SIZE="2")
    convert, build, visual = commands
    assert convert[1].endswith("/convert_checkpoint.py")
    assert flags(convert)["--tp_size"] == "2" and flags(convert)["--dtype"] == "float16"
    assert build[0] == "trtllm-build"
    built = flags(build)
    budget = SUPPORTED_FAMILIES[family].feature_budget(batch, images)
    assert built["--max_multimodal_len"] == str(budget)
    assert built["--max_batch_size"] == str(batch)
    assert built["--use_paged_context_fmha"] == "enable"
    assert built["--checkpoint_dir"] == flags(convert)["--output_dir"]
    assert int(built["--max_input_len"]) >= budget // batch
    assert int(built["--max_seq_len"]) > int(built["--max_input_len"])
    assert visual[1].endswith("/build_visual_engine.py")
    assert flags(visual)["--model_type"] == family
    assert flags(visual)["--max_batch_size"] == str(visual_batch)


def test_mllama_recipe_budgets_encoder_input() -> None:
    commands, _ = dry_run("mllama", MAX_BATCH="8")
    convert, build, visual = commands
    assert flags(convert)["--dtype"] == "bfloat16"
    built = flags(build)
    assert built["--max_encoder_input_len"] == "6404" and "--max_multimodal_len" not in built
    assert built["--gemm_plugin"] == "auto"
    assert flags(visual)["--model_type"] == "mllama"


def test_whisper_recipe_matches_the_guide() -> None:
    commands, _ = dry_run("whisper")
    convert, encoder, decoder = commands
    assert flags(convert)["--model_name"] == "large-v3"
    assert flags(encoder)["--max_input_len"] == "3000"
    assert flags(encoder)["--checkpoint_dir"].endswith("/encoder")
    assert flags(decoder)["--max_encoder_input_len"] == "3000"
    assert flags(decoder)["--max_input_len"] == "14"
    assert flags(decoder)["--gpt_attention_plugin"] == "float16"


@pytest.mark.parametrize(
    ("recipe", "env", "message"),
    [
        ("llava", {"MODEL_DIR": ""}, "set MODEL_DIR"),
        ("llava", {"MAX_BATCH": "0"}, "MAX_BATCH must be a positive integer"),
        ("llava", {"DTYPE": "int8"}, "DTYPE must be float16 or bfloat16"),
        ("whisper", {"TP_SIZE": "2"}, "TP_SIZE=1"),
        ("vila", {"VILA_PATH": ""}, "set VILA_PATH"),
    ],
)
def test_recipes_refuse_bad_parameters(recipe: str, env: dict[str, str], message: str) -> None:
    base = {"PATH": os.environ["PATH"], "DRY_RUN": "1", "MODEL_DIR": "/m", "OUTPUT_DIR": "/e"}
    base["VILA_PATH"] = "/v"
    result = subprocess.run(
        ["bash", str(ENGINES / f"{recipe}.sh")],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2 and message in result.stderr


def engines_from(commands: list[list[str]], root: Path) -> None:
    """Write the config.json files the recipe's commands would produce."""
    convert = flags(commands[0])
    for argv in commands[1:]:
        built = flags(argv)
        out = Path(root, built["--output_dir"].lstrip("/"))
        if argv[0] == "trtllm-build":
            config = fakes.llm_config(
                max_batch_size=int(built["--max_batch_size"]),
                max_input_len=int(built.get("--max_input_len", 1024)),
                max_prompt_embedding_table_size=int(built.get("--max_multimodal_len", 0)),
                max_encoder_input_len=int(built.get("--max_encoder_input_len", 0)),
                plugin_config={"use_paged_context_fmha": "--use_paged_context_fmha" in built},
            )
            tp = int(convert.get("--tp_size", 1))
            pretrained = {"dtype": convert["--dtype"], "mapping": {"world_size": tp}}
            if out.name == "encoder":
                pretrained["n_mels"] = 128
            fakes.write_engine(out, fakes.with_pretrained(config, **pretrained))
        else:
            visual = fakes.visual_config(built["--model_type"], int(built["--max_batch_size"]))
            fakes.write_engine(out, visual)


@pytest.mark.parametrize("family", sorted(SUPPORTED_FAMILIES))
def test_recipe_engines_pass_the_repository_checks(
    family: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.cli import main

    commands, notes = dry_run(family, TP_SIZE="1" if family == "whisper" else "2")
    engines_from(commands, tmp_path)
    (next_step,) = [shlex.split(n[len("# next: ") :]) for n in notes if n.startswith("# next:")]
    assert next_step[:2] == ["mmgw", "trtllm-repo"]
    backend = fakes.write_templates(tmp_path / "backend")
    (tmp_path / "models" / "m").mkdir(parents=True)
    argv = [
        str(tmp_path / a.lstrip("/")) if a.startswith(("/engines", "/models")) else a
        for a in next_step[2:]
    ]
    argv[argv.index("--templates") + 1] = str(backend)
    argv[argv.index("--output") + 1] = str(tmp_path / "repo")
    argv += ["--whisper-assets", str(tmp_path)] if family == "whisper" else []
    code = main(["trtllm-repo", *argv])
    assert code == 0, capsys.readouterr().err
