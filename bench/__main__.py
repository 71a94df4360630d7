"""``python -m bench <command>``: the benchmark commands.

- ``overhead``: the gateway against direct gRPC, Triton's generate_stream and LiteLLM
- ``scale``: gateway throughput under flood with 1, 2, 4, 8 worker processes
- ``gpu-goals``: issue 28's goals in one run (flood ratio x5, tokens per CPU-second, 64 paced
  streams, image TTFT at 336/1024 px), a table of goal vs measured
- ``trace``: image requests traced by the gateway (OTLP to a local receiver): each phase's
  start and length, the hand-offs included
- ``held``: 1,000 concurrent SSE streams through one gateway process
- ``serve``: Triton with the load fixture and the gateway, left running (for aiperf, curl)
- ``aiperf``: NVIDIA's aiperf profiling the gateway with images and streaming
- ``hotpath``: in-process CPU microseconds per token and per request (before/after)
- ``goals-plot RESULTS.json ... --out PNG``: gpu-goals' image rows drawn, every run's dots
- ``image-job``: in-process milliseconds of one image's decode thread job (warm and paced)
- ``structured``: a large JSON schema's compile time (cold, cached) and the in-process cost
  of ``json_schema`` and ``tools`` requests against plain text
- ``hostile``: 200 hostile guides in a row against one gateway process: same PID, RSS, and
  another client's stream's largest gap between tokens meanwhile
- ``profile``: py-spy samples of the gateway process under streaming load
- ``report DIR``: re-render a saved run's tables, goals and plot
- ``replicas``: KV reuse with image-affinity routing over embedded Triton replicas
- ``real-shape``: the added TTFT of a one-image request on the reference LLaVA at
  LLaVA-1.5-7B's dimensions (random weights) on the GPU, paired with direct gRPC
- ``reference-gpu``: the GPU check of the reference models (``bench/reference_gpu.py``)
- ``realtime``: 200 live transcription sessions held on one process (memory per session), or
  ``--latency``: speech end -> ``completed`` for a 3 s utterance
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    from bench import (
        aiperf,
        held,
        hostile,
        hotpath,
        overhead,
        profile,
        replicas,
        scale,
        serve,
        structured,
    )

    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    overhead.add_arguments(commands.add_parser("overhead", help="gateway cost vs peers"))
    scale.add_arguments(commands.add_parser("scale", help="throughput as workers are added"))
    from bench import gpu_goals, trace

    gpu_goals.add_arguments(commands.add_parser("gpu-goals", help="issue 28's goals, one run"))
    trace.add_arguments(commands.add_parser("trace", help="an image request's traced phases"))
    held.add_arguments(commands.add_parser("held", help="many held SSE streams"))
    serve.add_arguments(commands.add_parser("serve", help="run the bench stack"))
    aiperf.add_arguments(commands.add_parser("aiperf", help="aiperf against the gateway"))
    profile.add_arguments(commands.add_parser("profile", help="py-spy the gateway under load"))
    hotpath.add_arguments(commands.add_parser("hotpath", help="in-process per-token CPU"))
    from bench import image_job

    image_job.add_arguments(commands.add_parser("image-job", help="one image's job, in-process"))
    from bench import goals_plot

    goals_plot.add_arguments(commands.add_parser("goals-plot", help="gpu-goals' images, drawn"))
    structured.add_arguments(
        commands.add_parser("structured", help="schema compile and structured request cost")
    )
    replicas.add_arguments(commands.add_parser("replicas", help="affinity routing vs KV reuse"))
    from bench import realtime

    realtime.add_arguments(commands.add_parser("realtime", help="live transcription sessions"))
    hostile.add_arguments(commands.add_parser("hostile", help="200 hostile guides, one process"))
    from bench import real_shape

    real_shape.add_arguments(
        commands.add_parser("real-shape", help="added TTFT on a 7B-shaped model, paired")
    )
    rerender = commands.add_parser("report", help="re-render a saved run")
    rerender.add_argument("folder", type=Path)
    gpu = commands.add_parser("reference-gpu", help="GPU check of the reference models")
    gpu.add_argument("--triton-only", action="store_true", help="skip the kit checks")
    return parser


def _rerender(folder: Path) -> int:
    from bench import overhead, report

    saved = json.loads((folder / "results.json").read_text())
    print(overhead.write_report(folder, saved["machine"], report.from_dicts(saved["rows"])))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "reference-gpu":
        from bench import reference_gpu

        return reference_gpu.main()
    if args.command == "report":
        return _rerender(args.folder)
    if args.command == "hotpath":
        from bench import hotpath

        return hotpath.main(args)
    if args.command == "goals-plot":
        from bench import goals_plot

        return goals_plot.main(args)
    if args.command == "image-job":
        from bench import image_job

        return image_job.main(args)
    if args.command == "realtime":
        from bench import realtime

        return realtime.run(args)
    if args.command == "structured":
        from bench import structured

        return structured.main(args)
    if args.command == "hostile":
        from bench import hostile

        return hostile.main(args)
    import uvloop

    from bench import aiperf, held, overhead, profile, replicas, scale, serve

    if args.command == "replicas":
        return uvloop.run(replicas.run(args))

    if args.command == "scale":
        return uvloop.run(scale.run(args))
    if args.command == "trace":
        from bench import trace

        return uvloop.run(trace.run(args))
    if args.command == "real-shape":
        from bench import real_shape

        return uvloop.run(real_shape.run(args))
    if args.command == "gpu-goals":
        from bench import gpu_goals

        return uvloop.run(gpu_goals.run(args))
    if args.command == "overhead":
        return uvloop.run(overhead.run(overhead.options_from(args)))
    if args.command == "held":
        return uvloop.run(held.run(args))
    if args.command == "profile":
        return uvloop.run(profile.run(args))
    if args.command == "serve":
        return uvloop.run(serve.run(args))
    return uvloop.run(aiperf.run(args))


if __name__ == "__main__":
    sys.exit(main())
