"""Every variable the deploy files read is documented in deploy/README.md, every
``MMGW_*`` name documented there is a real gateway setting, and every relative link in the
README and docs/ leads to a file of the repository."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

from pydantic import BaseModel

from gateway.config import Settings

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "deploy" / "README.md").read_text()
DOCUMENTED = set(re.findall(r"`([A-Z][A-Za-z0-9_]*[A-Za-z0-9])`", DOC))


def shell_variables(path: Path) -> set[str]:
    """Upper-case (environment) variables a script expands; lower-case ones are locals."""
    return set(re.findall(r"\$\{([A-Z][A-Za-z0-9_]*)", path.read_text()))


def test_compose_variables_are_documented() -> None:
    used = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", (ROOT / "docker-compose.yml").read_text()))
    assert used and used <= DOCUMENTED, used - DOCUMENTED


def test_llmapi_compose_variables_are_documented() -> None:
    text = (ROOT / "docker-compose.llmapi.yml").read_text()
    used = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", text))
    assert "TRITON_LLMAPI_VERSION" in used and used <= DOCUMENTED, used - DOCUMENTED


def test_script_variables_are_documented() -> None:
    internal = {"FAMILY", "FEATURES_PER_IMAGE", "TILES_PER_IMAGE", "CHECKPOINT", "PAGED"}
    internal |= {"ENCODER_INPUT_LEN", "MEL_FRAMES", "BASH_SOURCE"}
    scripts = [
        *sorted((ROOT / "deploy" / "engines").glob("*.sh")),
        ROOT / "deploy/triton/launch.sh",
    ]
    for script in scripts:
        missing = shell_variables(script) - internal - DOCUMENTED
        assert not missing, f"{script.name}: {sorted(missing)}"


def settings_variables(model: type[BaseModel] = Settings, prefix: str = "MMGW_") -> set[str]:
    """Every environment variable the settings read, nested sections included."""
    names = set()
    for name, field in model.model_fields.items():
        section = field.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            names |= settings_variables(section, f"{prefix}{name}__".upper())
        else:
            names.add(f"{prefix}{name}".upper())
    return names


def test_documented_gateway_settings_exist() -> None:
    documented = {name for name in DOCUMENTED if name.startswith("MMGW_")}
    assert "MMGW_API_KEYS" in documented
    assert documented <= settings_variables(), documented - settings_variables()


def documented_commands(text: str, program: str) -> list[list[str]]:
    """Every ``program ...`` command in the text's bash blocks, continuation lines joined."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = block.replace("\\\n", " ")
        commands += [shlex.split(line) for line in joined.splitlines() if line.startswith(program)]
    return commands


def test_documented_trtllm_repo_commands_parse() -> None:
    from gateway.cli import _parser

    readme = (ROOT / "README.md").read_text()
    commands = documented_commands(readme, "mmgw trtllm-repo")
    commands += documented_commands(DOC, "mmgw trtllm-repo")
    assert len(commands) == 4
    parsed = [_parser().parse_args(argv[1:]) for argv in commands]
    assert all(args.command == "trtllm-repo" for args in parsed)
    engine = [args for args in parsed if args.backend == "engine"]
    llmapi = [args for args in parsed if args.backend == "llmapi"]
    assert len(engine) == len(llmapi) == 2
    assert all(args.family == "llava" for args in engine)
    assert all(args.family is None and args.model.name.startswith("Qwen2.5-VL") for args in llmapi)


def test_documented_recipe_runs_dry(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    block = next(b for b in re.findall(r"```bash\n(.*?)```", readme, flags=re.S) if ".sh" in b)
    lines = block.replace("\\\n", " ").splitlines()
    line = next(x for x in lines if "deploy/engines/" in x and not x.startswith("#"))
    env = dict(word.split("=", 1) for word in shlex.split(line) if "=" in word)
    result = subprocess.run(
        ["bash", str(ROOT / shlex.split(line)[-1])],
        env={"PATH": os.environ["PATH"], "DRY_RUN": "1", **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "--max_multimodal_len 4608" in result.stdout


# [text](target) and ![alt](target) (an optional "title" after the target), and reference
# definitions "[name]: target" at the start of a line.
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*([^)\s]+)[^)]*\)")
REFERENCE_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*(\S+)", flags=re.M)
FENCED_BLOCK = re.compile(r"^ {0,3}```.*?^ {0,3}```", flags=re.S | re.M)


def relative_links(text: str) -> list[str]:
    """Link targets outside fenced code blocks that are not URLs or in-page anchors."""
    prose = FENCED_BLOCK.sub("", text)
    targets = INLINE_LINK.findall(prose) + REFERENCE_LINK.findall(prose)
    return [t for t in targets if not re.match(r"[A-Za-z][A-Za-z0-9+.-]*:|#", t)]


def test_relative_links_resolve() -> None:
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for document in documents:
        for target in relative_links(document.read_text()):
            path = (document.parent / target.split("#", 1)[0]).resolve()
            if not path.is_relative_to(ROOT) or not path.exists():
                broken.append(f"{document.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_relative_links_are_found() -> None:
    text = """[a](docs/a.md) ![b](img/b.png "title") [c](https://x.org) [d](#part)
[f](g.md#h)

[ref]: docs/ref.md

```
[in code](nowhere.md)
```
"""
    assert relative_links(text) == [
        "docs/a.md",
        "img/b.png",
        "g.md#h",
        "docs/ref.md",
    ]
