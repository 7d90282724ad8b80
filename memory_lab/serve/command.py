"""``memory-lab serve``: its options, and starting uvicorn on 127.0.0.1 (imports kept light)."""

from __future__ import annotations

import argparse
import logging
import socket
import sys

from memory_lab.errors import ConfigError, EnvironmentProblem

HOST = "127.0.0.1"  # loopback only: the service has no authentication


def add_parser(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser(
        "serve", help="a chat service over memories on 127.0.0.1, with a browser playground"
    )
    serve.add_argument(
        "--memory",
        action="append",
        metavar="SPEC",
        help="a memory spec to serve, e.g. buffer or thread:saver=postgres (repeat for "
        "several, shown side by side in the playground; default: buffer)",
    )
    serve.add_argument(
        "--port", type=int, default=8765, help="port on 127.0.0.1 (0: a free one; default 8765)"
    )
    serve.add_argument("--llm", default="offline", help="answering model (default: offline)")
    serve.add_argument(
        "--memory-llm", default="offline", help="LLM inside memories (default: offline)"
    )
    serve.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="ROLE=MODEL",
        help="model for a memory model role, e.g. extractor=openai:gpt-4o-mini",
    )
    serve.add_argument(
        "--embeddings", default="offline", help="embeddings for memories (default: offline)"
    )
    serve.add_argument(
        "--base-url", help="OpenAI-compatible server for openai: models (or OPENAI_BASE_URL)"
    )
    serve.add_argument(
        "--resource",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a resource for memories, e.g. postgres=postgresql://... (or MEMORY_LAB_NAME)",
    )
    serve.add_argument(
        "--request-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a provider request that takes longer fails (default 60)",
    )
    serve.add_argument(
        "--max-message-chars",
        type=int,
        default=4000,
        metavar="N",
        help="longest message accepted (default 4000)",
    )
    serve.add_argument(
        "--rate",
        type=int,
        default=60,
        metavar="N",
        help="requests per user per minute (default 60)",
    )
    serve.add_argument(
        "--max-users", type=int, default=1000, metavar="N", help="users held at once (default 1000)"
    )
    serve.add_argument(
        "--postgres-pool",
        type=int,
        default=10,
        metavar="N",
        help="connections to each PostgreSQL server, shared by every user (default 10)",
    )
    serve.add_argument(
        "--postgres-wait",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="how long a request waits for a free PostgreSQL connection before a 503 (default 5)",
    )
    serve.add_argument(
        "--log-messages",
        action="store_true",
        help="also log message and reply texts (by default logs hold no text users typed)",
    )
    serve.set_defaults(func=run)


def settings_from(args: argparse.Namespace) -> object:
    """The ServeSettings the options describe, after every memory's preflight."""

    from memory_lab.log.config import RunConfig, named_values
    from memory_lab.memories.registry import preflight_memories
    from memory_lab.models.providers import check_provider, use_client_settings
    from memory_lab.models.spec import ClientSettings
    from memory_lab.run.context import RunModels
    from memory_lab.run.executors import prepare_stack
    from memory_lab.run.prepare import resolve_memories
    from memory_lab.serve.guard import Limits

    try:
        from memory_lab.serve.app import ServeSettings
    except ImportError as exc:
        raise missing_serve_extra("serve", exc) from None
    check_port(args.port)
    limits = Limits(
        max_message_chars=args.max_message_chars,
        rate=args.rate,
        max_users=args.max_users,
        postgres_pool=args.postgres_pool,
        postgres_wait=args.postgres_wait,
    )
    config = RunConfig.from_options(args, mode="live", cache=False)
    for spec in config.model_specs():
        check_provider(spec, config.base_url)
    use_client_settings(ClientSettings.from_env(config.request_timeout))  # read once, here
    specs = resolve_memories(args.memory or ["buffer"])
    resources = named_values(args.resource, "--resource")
    preflight_memories(specs, resources)  # an unreachable server fails here, in one line
    models = RunModels.create(config, resources=resources)
    prepare_stack(models, specs)  # requests run in threads: their imports happen here, once
    return ServeSettings(specs, models, limits, log_messages=args.log_messages)


def missing_serve_extra(command: str, exc: ImportError) -> EnvironmentProblem:
    """The one-line error of ``memory-lab serve`` or ``view`` without FastAPI or uvicorn."""
    return EnvironmentProblem(
        f"memory-lab {command} needs FastAPI and uvicorn ({exc.name} is missing): "
        "pip install 'memory-lab[serve]'"
    )


def check_port(port: int) -> None:
    """``--port`` within 0-65535 (0: a free one), checked before any work starts."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port must be between 0 and 65535, got {port}")


def listening_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"--port {port}: cannot listen on {HOST}: {exc.strerror}") from None
    sock.listen(128)
    return sock


def run(args: argparse.Namespace) -> int:
    from memory_lab.serve.app import create_app
    from memory_lab.serve.chat import warm_up

    settings = settings_from(args)
    # before the warm-up: loading an int8 engine logs on the root logger (onnxruntime's
    # quantizer), which would give it a WARNING handler and make this call a no-op, no access log
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # and redacted from the first line: the warm-up's exchange calls the answering model, whose
    # request line (httpx) names the --base-url, credentials included
    from memory_lab.text.redact import redact_logs

    redact_logs()
    print("memory-lab serve: warming up the models (once)", file=sys.stderr, flush=True)
    warm_up(settings.memories, settings.models)
    sock = listening_socket(args.port)
    port = sock.getsockname()[1]
    labels = ", ".join(s.label for s in settings.memories)
    print(f"memory-lab serve: http://{HOST}:{port}/ (playground) serving {labels}", flush=True)
    run_server(create_app(settings), sock)
    print("memory-lab serve: stopped", file=sys.stderr, flush=True)
    return 0


def run_server(app: object, sock: socket.socket) -> None:
    """Serve ``app`` with uvicorn on ``sock`` until Ctrl-C (``serve`` and ``view``); ValueError
    when it did not start."""
    import uvicorn

    from memory_lab.text.redact import redact_logs

    config = uvicorn.Config(app, access_log=False, log_level="info")
    server = uvicorn.Server(config)
    redact_logs()  # uvicorn's handlers too: no credential in any log line (httpx logs URLs)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass  # uvicorn stopped on the signal, then raised it again
    finally:
        sock.close()
    if not server.started:  # the lifespan failed (uvicorn logged why)
        raise EnvironmentProblem("the server did not start; see the log above")
