"""``contextwarden estimate``: the command's options turned into a replay of each session, and
its report printed (proxy/cli.py wires it)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import orjson
import yaml
from pydantic import ValidationError

from proxy.config.catalog import PriceOverride
from proxy.config.settings import ConfigError
from proxy.estimate import sources
from proxy.estimate.prelude import Prelude
from proxy.estimate.replay import Options, replay
from proxy.estimate.report import Figures, render, total
from proxy.estimate.session import TranscriptError
from proxy.formats import format_of


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], positive: Any) -> None:
    est = sub.add_parser(
        "estimate",
        help="replay past sessions (Claude Code, Codex, chat-completions JSONL) through the "
        "engine, offline: what would have been sent, trimmed, summarized, cached and paid",
    )
    est.add_argument(
        "paths",
        nargs="*",
        help="transcript files or directories of them (default: ~/.claude/projects and "
        "~/.codex/sessions)",
    )
    est.add_argument(
        "--window", type=positive, help="the window, in tokens (default: the model's known one)"
    )
    est.add_argument(
        "--prices",
        help="a YAML or JSON file: per model (or '*' for all), input_cost_per_token, "
        "cache_read_input_token_cost, cache_creation_input_token_cost (default: litellm's)",
    )
    est.add_argument("--model", help="plan every session for this model (default: its own)")
    est.add_argument(
        "--template",
        action="append",
        default=[],
        help="a request body the client sent (JSON): its system prompt, tools and options go "
        "with each rebuilt request of its format (repeatable, one per format)",
    )
    est.add_argument(
        "--overhead",
        type=_not_negative,
        help="without --template: the tokens of system prompt and tools the transcripts leave "
        "out (default: the client's own, measured: Claude Code 18727)",
    )
    est.add_argument("--team", help="plan as this team (default: the config's default_team)")
    est.add_argument("--config", help="YAML config (default: the embedded default config)")
    est.add_argument("--json", action="store_true", help="print the figures as JSON")


def run(args: argparse.Namespace) -> int:
    options = Options(
        config=args.config,
        window=args.window,
        prices=_prices(args.prices) if args.prices else {},
        model=args.model,
        team=args.team,
        prelude=Prelude(templates=_templates(args.template), overhead=args.overhead),
    )
    paths = [Path(p) for p in args.paths] or sources.default_places()
    searched = ", ".join(str(p) for p in paths or sources.default_candidates())
    try:
        found, skipped = sources.sessions(paths)
    except TranscriptError as exc:
        print(f"estimate: {exc}", file=sys.stderr)
        return 2
    if not args.model:
        skipped += [f"{s.name}: names no model (give --model)" for s in found if not s.model]
        found = [s for s in found if s.model]
    for reason in skipped:
        print(f"estimate: skipped {reason}", file=sys.stderr)
    for s in found:
        for warning in s.warnings:
            print(f"estimate: {warning}", file=sys.stderr)
    if not found:
        print(f"estimate: no session found (searched: {searched})", file=sys.stderr)
        return 1
    figures = [asyncio.run(replay(s, options)) for s in found]
    print(_json(figures) if args.json else render(figures))
    return 0


def _json(figures: list[Figures]) -> str:
    whole = {"sessions": [f.as_json() for f in figures], "total": total(figures)}
    return orjson.dumps(whole, option=orjson.OPT_INDENT_2).decode()


def _not_negative(text: str) -> int:
    """An argparse type: a whole number, zero or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is below 0")
    return value


def _prices(path: str) -> dict[str, dict[str, float]]:
    """The prices file's prices, each model's checked here: a mistake names this file, not
    the config the prices are put into."""
    loaded = _load("--prices", path)
    if not isinstance(loaded, dict) or not all(isinstance(v, dict) for v in loaded.values()):
        raise ConfigError(f"--prices {path}: a mapping of model (or '*') to its prices")
    for model, prices in loaded.items():
        try:
            PriceOverride(**prices)
        except ValidationError as exc:
            said = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(f"--prices {path}: {model}: {said}") from None
    return loaded


def _templates(paths: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in paths:
        body = _load("--template", path)
        if not isinstance(body, dict):
            raise ConfigError(f"--template {path}: not a request body (a JSON object)")
        out[format_of(body).name] = body
    return out


def _load(option: str, path: str) -> Any:
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{option} {path}: not YAML or JSON: {_yaml_problem(exc)}") from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """The parser's complaint on one line, where in the file it found it."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
    return str(exc).replace("\n", " ")
