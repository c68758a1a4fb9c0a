"""`mathscout serve`: the chat page and the JSON API, in this process or in the background (`--background`,
`--stop`: mathscout.ui.services)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mathscout.errors import MathScoutError
from mathscout.limits import LLM_BUDGET, LLM_RATE, PORT

DEFAULT_PORT = 7860


def add(sub, common: argparse.ArgumentParser) -> None:
    from mathscout.settings import Settings

    p = sub.add_parser("serve", parents=[common], help="the chat page in a browser (Gradio), on 127.0.0.1 by default")
    p.add_argument(
        "--index",
        type=Path,
        action="append",
        help="an index to offer (repeatable; default: the demo index and every index under $MATHSCOUT_HOME/indexes)",
    )
    p.add_argument(
        "--host", help="address to bind (default 127.0.0.1 or $MATHSCOUT_HOST; non-local ones need --public)"
    )
    p.add_argument(
        "--port",
        type=PORT.argparse(),
        help=f"port (default {DEFAULT_PORT} or $MATHSCOUT_PORT; with --background a free one)",
    )
    p.add_argument("--public", action="store_true", help="allow binding beyond localhost (e.g. --host 0.0.0.0)")
    p.add_argument("--share", action="store_true", help="also open a public gradio.live link")
    p.add_argument("--auth", metavar="USER:PASSWORD", help="require a login (or set MATHSCOUT_AUTH)")
    p.add_argument(
        "--allow-host",
        metavar="NAME",
        action="append",
        help="a host name the server answers for besides localhost, 127.0.0.1, [::1] and --host (repeatable; or "
        "MATHSCOUT_ALLOW_HOSTS); any other Host header is refused (DNS rebinding)",
    )
    p.add_argument("--no-llm", action="store_true", help="never call an LLM (offline planner only)")
    p.add_argument(
        "--llm-public",
        action="store_true",
        help="let clients beyond this machine have the LLM answer (default: only clients on this machine)",
    )
    p.add_argument(
        "--llm-rate",
        type=LLM_RATE.argparse(),
        metavar="N",
        help=f"{LLM_RATE.meaning} (default {Settings.llm_rate} or $MATHSCOUT_LLM_RATE)",
    )
    p.add_argument(
        "--llm-budget",
        type=LLM_BUDGET.argparse(),
        metavar="N",
        help=f"{LLM_BUDGET.meaning} (default {Settings.llm_budget} or $MATHSCOUT_LLM_BUDGET)",
    )
    p.add_argument(
        "--background",
        action="store_true",
        help="serve in a process of its own: returns once it listens, "
        "printing its URL and process id; 'mathscout search' and 'ask' then use it (as any 'serve' of yours "
        "on this machine)",
    )
    p.add_argument("--stop", action="store_true", help="stop your running services (with --index: those serving it)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    from mathscout.settings import settings

    configured = settings()  # unless given: MATHSCOUT_HOST, MATHSCOUT_PORT, MATHSCOUT_AUTH, … or the config file
    args.host = args.host or configured.host
    args.port = args.port or configured.port
    args.auth = args.auth or configured.auth
    args.allow_host = args.allow_host or [n.strip() for n in (configured.allow_hosts or "").split(",") if n.strip()]
    if args.stop or args.background:
        _serve_background(args)
        return
    from mathscout.ui.app import serve
    from mathscout.ui.llm_allowance import LlmPolicy

    serve(
        args.index or [],
        host=args.host,
        port=args.port or DEFAULT_PORT,
        public=args.public,
        share=args.share,
        auth=args.auth,
        use_llm=False if args.no_llm else None,
        allow_hosts=args.allow_host,
        llm=LlmPolicy.configured(args.llm_public or None, args.llm_rate, args.llm_budget, share=args.share),
    )


def _serve_background(args: argparse.Namespace) -> None:
    """`serve --stop`, and `serve --background`: the same `serve` in a process of its own (mathscout.ui.services)."""
    from mathscout.ui import services

    if args.stop:
        services.stop(args.index or [])
        return
    if args.share:
        raise MathScoutError("--share serves the page only, which the command line cannot use: leave out --background")
    port = args.port or services.free_port(args.host)
    serve_arguments = [f"--index={path}" for path in args.index or []] + [f"--host={args.host}", f"--port={port}"]
    serve_arguments += [
        flag
        for flag, on in (
            ("--public", args.public),
            ("--no-llm", args.no_llm),
            ("--quiet", args.quiet),
            ("--llm-public", args.llm_public),
        )
        if on
    ]
    serve_arguments += [f"--allow-host={name}" for name in args.allow_host]
    serve_arguments += [
        f"--{name}={value}" for name, value in (("llm-rate", args.llm_rate), ("llm-budget", args.llm_budget)) if value
    ]
    services.start_background(serve_arguments, args.auth)
