"""`sleuth serve`: the HTTP API of `sleuth.workers.serve` on uvicorn."""

from __future__ import annotations

import argparse
import sys

from sleuth.workers.session import add_session_arguments, open_session


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve an HTTP API: start runs, get results, stream events (SSE), answer reviews",
        description=(
            "Serve Sleuth's HTTP API for applications: POST /runs, GET /runs/{id}, "
            "GET /runs/{id}/events (server-sent events), GET and POST /runs/{id}/review, and "
            "pages: / lists recent runs, /runs/{id} in a browser follows one live. OpenAPI "
            "docs at /docs. Safe to expose: see docs/security-serve.md."
        ),
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1); any other address needs a token "
        "(SLEUTH_SERVE_TOKEN or SLEUTH_SERVE_TOKEN_FILE), and names other than loopback's "
        "must be in SLEUTH_SERVE_ALLOWED_HOSTS",
    )
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    add_session_arguments(parser)
    parser.set_defaults(func=run_serve_command)


async def run_serve_command(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from sleuth.workers.serve import create_api
        from sleuth.workers.serve_guard import ServeGuard, ServeSettingsError
    except ImportError as exc:
        print(
            f"sleuth: serve needs FastAPI and uvicorn ({exc}); install them with "
            "pip install 'sleuth[serve]'",
            file=sys.stderr,
        )
        return 2
    try:
        guard = ServeGuard.from_settings(args.host)
    except ServeSettingsError as exc:
        print(f"sleuth: {exc}", file=sys.stderr)
        return 2
    async with open_session(args.app, task_queue=args.task_queue) as session:
        api = create_api(session.client, session.task_queue, guard)
        config = uvicorn.Config(api, host=args.host, port=args.port, log_level="warning")
        server = uvicorn.Server(config)
        print(
            f"sleuth serve: http://{args.host}:{args.port} (runs go to task queue "
            f"{session.task_queue!r}; API docs at /docs"
            + ("; every request needs the token)" if guard.token else ")"),
            file=sys.stderr,
            flush=True,
        )
        await server.serve()
    return 0
