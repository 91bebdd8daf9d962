"""contextwarden: a context-window proxy for LLM clients (chat completions, Responses,
Anthropic Messages). Commands: serve, check-config, demo, preview, client-setup, windows,
capabilities, estimate; each has --help."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from proxy.config.environment import prepare_environment
from proxy.config.settings import ConfigError, Settings, load_settings
from proxy.config.startup import WILDCARDS, client_url, key_notes, self_loop_problem
from proxy.providers.registry import provider_of
from proxy.windows.advice import banner_lines, small_window_lines
from proxy.windows.discovery import asks
from proxy.windows.families import is_pattern


def build_parser() -> argparse.ArgumentParser:
    """The command line: every command and option with its help."""
    parser = argparse.ArgumentParser(
        prog="contextwarden",
        description=__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", help="YAML config (default: the embedded default config)")
    serve.add_argument("--host", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default 8080)")
    serve.add_argument(
        "--workers",
        type=_positive,
        help="processes serving the one port (default 1); they share the store",
    )
    check = sub.add_parser("check-config", help="validate a config file and exit")
    check.add_argument("path", help="the YAML config file to check")
    demo = sub.add_parser(
        "demo",
        help="a local upstream, the proxy, and a growing conversation",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    demo.add_argument(
        "--turns", type=_positive, default=16, help="how many turns the demo conversation grows by"
    )
    demo.add_argument(
        "--window",
        type=_positive,
        default=1024,
        help="the demo upstream's context window, in tokens",
    )
    demo.add_argument(
        "--format",
        choices=["chat", "responses", "anthropic"],
        default="chat",
        help="the wire format the demo client speaks",
    )
    prev = sub.add_parser("preview", help="show what the proxy would forward for a request body")
    prev.add_argument(
        "file", help="a request body (JSON): chat completions, Responses or Anthropic Messages"
    )
    prev.add_argument(
        "--format",
        choices=["chat", "responses", "anthropic"],
        help="the body's wire format (default: told from its shape)",
    )
    prev.add_argument("--model", help="model to plan for (default: the body's own model)")
    prev.add_argument(
        "--team",
        help="plan as this team: its policy, models and max_context_tokens (default: "
        "the config's default_team)",
    )
    prev.add_argument("--config", help="YAML config (default: the embedded default config)")
    prev.add_argument("--json", action="store_true", help="print the report object as JSON")
    setup = sub.add_parser(
        "client-setup",
        help="print the lines a client reads to know the window the proxy fits its model to",
    )
    setup.add_argument("client", choices=["claude", "codex", "agents"], help="the client")
    setup.add_argument("--model", help="the model the client will use (default: the config's one)")
    setup.add_argument("--window", type=_positive, help="its window (default: config, table)")
    setup.add_argument("--config", help="YAML config (default: the embedded default config)")
    setup.add_argument("--url", help="the proxy's address (default: the config's host and port)")
    _learned_commands(sub)
    from proxy.estimate import command as estimate

    estimate.add_parser(sub, _positive)
    return parser


def _learned_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``windows`` and ``capabilities``: what was learned, listed and forgotten in the store
    itself (no running proxy, no admin API)."""
    windows = sub.add_parser(
        "windows", help="list or forget the windows learned from overflows (in the store)"
    )
    act = windows.add_subparsers(dest="action", required=True, help="list or forget")
    act.add_parser("list", help="what was learned, per team and model").add_argument(
        "--config", help="YAML config (default: the embedded default config)"
    )
    forget = act.add_parser("forget", help="forget what was learned about a model")
    forget.add_argument("model", help="the model")
    forget.add_argument(
        "--team",
        help="only for this team (in passthrough, the caller scope a refusal named, "
        "team~caller; default: every one)",
    )
    forget.add_argument("--config", help="YAML config (default: the embedded default config)")
    caps = sub.add_parser(
        "capabilities",
        help="list or forget the upstreams learned not to compact (in the store)",
    )
    act = caps.add_subparsers(dest="action", required=True, help="list or forget")
    act.add_parser("list", help="per caller scope, the upstreams").add_argument(
        "--config", help="YAML config (default: the embedded default config)"
    )
    forget = act.add_parser("forget", help="ask an upstream to compact again, for a scope")
    forget.add_argument("scope", help="the team (in passthrough, team~caller)")
    forget.add_argument("upstream", help="the upstream's name")
    forget.add_argument("--config", help="YAML config (default: the embedded default config)")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    prepare_environment()
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "check-config":
            return _check(args.path)
        if args.command == "preview":
            return _preview(args)
        if args.command == "client-setup":
            return _client_setup(args)
        if args.command in ("windows", "capabilities"):
            return asyncio.run(_learned(args))
        if args.command == "estimate":
            from proxy.estimate.command import run

            return run(args)
        from proxy.demo.run import run_demo

        return run_demo(args.turns, args.window, args.format)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2


async def _learned(args: argparse.Namespace) -> int:
    """``windows`` and ``capabilities``, on the store the config names."""
    from proxy.stores import open_store
    from proxy.windows import stored

    settings = load_settings(args.config)
    path = Path(settings.data_dir) / "checkpoints.sqlite3"
    if settings.checkpoints.backend != "redis" and not path.exists():
        # Nothing was ever stored there (a list is no reason to make a store).
        if args.action == "list":
            print("{}")
            return 0
        print(f"nothing was learned: no store at {path}", file=sys.stderr)
        return 1
    store = open_store(settings)
    try:
        if args.action == "list":
            listed: object = (
                stored.lessons(await store.learned_windows())
                if args.command == "windows"
                else await stored.capabilities(store)
            )
            print(json.dumps(listed, indent=2, sort_keys=True))
            return 0
        if args.command == "windows":
            scopes = await stored.forget_window(store, args.model, args.team)
            done = f"forgot what was learned about {args.model} for {', '.join(scopes)}"
            missing = f"nothing was learned about {args.model}" + (
                f" for {args.team}" if args.team else ""
            )
        else:
            scopes = (
                [args.scope]
                if await stored.forget_capability(store, args.scope, args.upstream)
                else []
            )
            done = f"{args.upstream}'s next compaction for {args.scope} is forwarded again"
            missing = f"nothing was learned about {args.upstream} for {args.scope}"
    finally:
        await store.close()
    if not scopes:
        print(missing, file=sys.stderr)
        return 1
    print(f"{done}; a running proxy forgets it at its next start (or now: the admin API)")
    return 0


def _client_setup(args: argparse.Namespace) -> int:
    from proxy.windows.client_setup import SetupError, lines, setup_for

    settings = load_settings(args.config)
    url = args.url or client_url(settings.host, settings.port)
    try:
        setup = setup_for(settings, url.rstrip("/"), args.model, args.window)
    except SetupError as exc:
        print(f"client-setup: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines(args.client, setup)))
    return 0


def _positive(text: str) -> int:
    """An argparse type: a whole number above zero."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not above 0")
    return value


def _check(path: str) -> int:
    """check-config: the file validated, what its families take, the key variables it names
    that are unset, and what ``serve`` would refuse (exit 2)."""
    settings = load_settings(path)
    counts = f"{len(settings.upstreams)} upstreams, {len(settings.models)} models"
    if settings.upstreams_defaulted:
        counts += "; the upstreams are the embedded default's: the file configures none"
    print(f"{path}: ok ({counts})")
    print("\n".join([*_families(settings), *(f"  {n}" for n in key_notes(settings))]))
    problem = start_problem(settings)
    if problem is not None:
        print(f"{path}: serve would refuse it: {problem}", file=sys.stderr)
        return 2
    return 0


def start_problem(settings: Settings) -> str | None:
    """Why ``serve`` must not start with these settings, or None."""
    return settings.exposure_problem() or self_loop_problem(settings)


def banner(settings: Settings, path: str | None) -> str:
    """What ``serve`` serves, before it starts: the config, the URL to point clients at,
    upstreams, each configured model's window and where it comes from, auth and the store."""
    from proxy.windows.modeltable import ModelTable

    table = ModelTable.bundled()
    url = client_url(settings.host, settings.port)
    listening = (
        f"contextwarden on all addresses, port {settings.port}"
        if settings.host in WILDCARDS
        else f"contextwarden on {url}"
    )
    lines = [
        f"{listening} (point clients at {url}/v1; Anthropic clients at {url})",
        f"  config: {path or 'the embedded default'}; auth: {settings.auth}; "
        f"store: {settings.checkpoints.backend}",
        "  upstreams: "
        + ", ".join(f"{n} ({u.base_url or u.provider})" for n, u in settings.upstreams.items())
        + (" (the embedded default's)" if path and settings.upstreams_defaulted else ""),
        f"  models not listed go to {settings.default_upstream!r}, with the window "
        + (
            "their server states (discovery) or litellm's"
            if asks(settings.upstreams[settings.default_upstream])
            else "litellm's table states"
        ),
    ]
    for name, entry in settings.models.items():
        window, source = str(entry.context_window), "config"
        where = entry.upstream or settings.default_upstream
        upstream = settings.upstreams[where]
        if not entry.context_window:
            # A litellm upstream serves the model its own ``model:`` names.
            known = table.lookup(provider_of(upstream).table_model(upstream, name))
            window, source = (
                (str(known.window), known.source or "litellm's table")
                if known
                else ("?", "unknown")
            )
            if asks(upstream):
                source += f"; the server is asked ({upstream.discovery})"
        if is_pattern(name) and not entry.context_window:
            lines.append(f"  family {name}: via {where}, each name's window from litellm's table")
            continue
        kind = "family" if is_pattern(name) else "model"
        lines.append(f"  {kind} {name}: window {window} ({source}) via {where}")
        if window.isdigit():
            lines += small_window_lines(name, int(window))
    lines += _families(settings)
    lines += banner_lines()
    lines.append(_admin_line(settings.admin_key_env))
    each = f"each of the {settings.workers} workers" if settings.workers > 1 else "the process"
    caches = (
        "its caches share what its footprint leaves"
        if settings.caches
        else "caches: off, so its cross-request caches keep nothing"
    )
    lines.append(
        f"  memory: {settings.limits.memory_budget_mb} MiB for {each} "
        f"(limits.memory_budget_mb); {caches} (/admin/stats: memory)"
    )
    lines += [f"  {note}" for note in key_notes(settings)]
    return "\n".join(lines)


def _admin_line(admin: str | None) -> str:
    """Whether the admin API is on, and what turns it on."""
    endpoints = "/admin/stats, /admin/learned-windows (the learned windows, which lower these)"
    if not admin:
        return (
            f"  admin API ({endpoints}): off until the config names its key's variable "
            "(admin_key_env: CW_ADMIN_KEY)"
        )
    if not os.environ.get(admin):
        return f"  admin API ({endpoints}): off until ${admin} is set"
    return f"  admin API (key in ${admin}): {endpoints}"


def _families(settings: Settings) -> list[str]:
    from proxy.windows.families import describe
    from proxy.windows.modeltable import ModelTable

    return describe(settings.models, ModelTable.bundled().names())


def _preview(args: argparse.Namespace) -> int:
    import asyncio

    import orjson
    from starlette.datastructures import Headers

    from proxy.edge.auth import Principal
    from proxy.edge.preview import offline_preview, render_table
    from proxy.errors import ProxyError
    from proxy.formats import FORMATS

    settings = load_settings(args.config)
    team = args.team or settings.default_team
    if team not in settings.teams:
        source = args.config or "the embedded default config"
        teams = ", ".join(sorted(settings.teams))
        raise ConfigError(f"--team {team!r}: {source} has no such team (its teams: {teams})")
    try:
        body = Path(args.file).read_bytes()
    except OSError as exc:
        print(f"{args.file}: cannot read: {exc.strerror}", file=sys.stderr)
        return 2
    if args.model:
        body = _with_model(body, args.model)
    try:
        who = Principal(team=team, config=settings.teams[team], forward_client_auth=False)
        fmt = FORMATS[args.format] if args.format else None
        result = asyncio.run(offline_preview(body, Headers(), settings, who, fmt))
    except ProxyError as exc:
        print(f"{args.file}: {exc.message}", file=sys.stderr)
        return 1
    text = orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() if args.json else None
    try:
        print(text if text is not None else render_table(result))
        sys.stdout.flush()
    except BrokenPipeError:  # `| head` closed the pipe: not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _with_model(body: bytes, model: str) -> bytes:
    import orjson

    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body  # the preview reports the JSON error
    if isinstance(payload, dict):
        payload["model"] = model
        return orjson.dumps(payload)
    return body


def _serve(args: argparse.Namespace) -> int:
    from proxy.serving import configure_logging, serve

    configure_logging()
    flags = {"host": args.host, "port": args.port, "workers": args.workers}
    overrides = {k: v for k, v in flags.items() if v is not None}
    # The options beat the environment, and are validated as the file's keys are.
    settings = load_settings(args.config, flags=overrides)
    problem = start_problem(settings)
    if problem is not None:
        raise ConfigError(problem)
    print(banner(settings, args.config), file=sys.stderr, flush=True)
    serve(settings, args.config, overrides)
    return 0


if __name__ == "__main__":
    sys.exit(main())
