"""The MathScout chat page: `build_app` lays out the Gradio Blocks, `serve` starts it (`mathscout serve`)."""

from __future__ import annotations

import contextlib
import html
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import gradio as gr

from mathscout.clients import address_of
from mathscout.config import DEMO_CORPUS
from mathscout.corpus.math_spans import find_math
from mathscout.errors import MathScoutError, QueryError
from mathscout.options import AUTO, MODE
from mathscout.retrievers.registry import rerank_choices, rerank_kind
from mathscout.ui import services
from mathscout.ui.access_log import AccessLog
from mathscout.ui.chat import (
    EMPTY_RESULTS,
    EMPTY_TRACE,
    MAX_K,
    AssistantPool,
    SessionState,
    TurnOutput,
    refused_turn,
    run_turn,
    search_turn,
)
from mathscout.ui.cross_site import CrossSiteCheck
from mathscout.ui.hosts import HostCheck, HostPolicy
from mathscout.ui.indexes import discover_indexes
from mathscout.ui.inputs import formula_problem
from mathscout.ui.llm_allowance import LlmAllowance, LlmPolicy, LlmRefused
from mathscout.ui.login import LoginGuard
from mathscout.ui.redact import PathRedactor
from mathscout.ui.style import CSS, HEAD, SCROLL_TO_ANSWER

LATEX_DELIMITERS: list[dict[str, str | bool]] = [
    {"left": "$$", "right": "$$", "display": True},
    {"left": "$", "right": "$", "display": False},
    {"left": "\\(", "right": "\\)", "display": False},
    {"left": "\\[", "right": "\\]", "display": True},
]
LATEX_DELIMITERS.extend(
    {"left": f"\\begin{{{env}}}", "right": f"\\end{{{env}}}", "display": True}
    for env in ("equation", "equation*", "align", "align*", "gather", "gather*")
)
log = logging.getLogger("mathscout.ui")
EXAMPLES_FILE = DEMO_CORPUS.parent / "demo_examples.json"
MAX_EXAMPLES = 6
EXAMPLE_LABEL_CHARS = 58  # Gradio cuts example labels at 60 characters
FONT: list[gr.themes.Font | str] = [
    gr.themes.LocalFont("IBM Plex Sans", weights=(400, 600, 700)),
    "ui-sans-serif",
    "system-ui",
    "sans-serif",
]
FONT_MONO: list[gr.themes.Font | str] = [
    gr.themes.LocalFont("IBM Plex Mono", weights=(400, 600)),
    "ui-monospace",
    "monospace",
]
CONCURRENCY = 4  # turns computed at once; more sessions wait in Gradio's queue
WARM_UP_QUESTIONS = ("Why is $a^2+b^2=c^2$ true?", "proof of the pythagorean theorem")  # formula and words
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
LOOK = dict(
    theme=gr.themes.Soft(primary_hue="indigo", font=FONT, font_mono=FONT_MONO),
    css=CSS,
    head=HEAD,
    footer_links=["api", "settings"],
    show_error=False,
)  # launch() and mount_gradio_app() options alike
MAX_CHAT_MESSAGES = 200  # messages of a session's chat kept on the server (older ones leave the chat)


def example_questions(limit: int = MAX_EXAMPLES) -> list[str]:
    """Questions the demo corpus answers well (mathscout/data/demo_examples.json)."""
    try:
        return [e["question"] for e in json.loads(EXAMPLES_FILE.read_text(encoding="utf-8"))][:limit]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def example_label(question: str, limit: int = EXAMPLE_LABEL_CHARS) -> str:
    """A short label for an example chip: words are dropped before a formula is ever cut (a cut formula
    cannot be rendered)."""
    if len(question) <= limit:
        return question
    spans = find_math(question)
    if not spans:
        return question[: limit - 1].rsplit(" ", 1)[0] + " …"
    first = spans[0]
    tail = question[first.start :]
    room = limit - len(tail) - 2
    if room <= 0:
        return question[: first.start].strip()[: limit - 1].rsplit(" ", 1)[0] + " …" if first.start else tail
    head = question[: first.start].rstrip()
    return "… " + head[len(head) - room :].split(" ", 1)[-1] + " " + tail if len(head) > room else question


def _menu() -> dict:
    """Every mode with "auto", in the page's menu order (`ModeSpec.menu`: the retriever registry's and `auto`'s)."""
    from mathscout.ui.registry import all_modes

    modes = all_modes()
    return {name: modes[name] for name in sorted(modes, key=lambda m: (modes[m].menu, m))}


def mode_label(name: str) -> str:
    spec = _menu().get(name)
    return spec.label if spec is not None and spec.label else name


def mode_choices(modes: Sequence[str]) -> list[tuple[str, str]]:
    """The index's modes as dropdown choices, in the registry's menu order (auto first)."""
    menu = list(_menu())
    ordered = sorted(modes, key=lambda m: (menu.index(m) if m in menu else len(menu), m))
    return [(mode_label(m), m) for m in ordered]


def page_modes(assistant) -> list[str]:
    """The search modes the page offers for an assistant's index: `auto`, then those its menu offers
    (`mathscout.agent.planned.menu_modes`, the one list; hybrid only where it fuses what it was made for)."""
    from mathscout.agent.planned import menu_modes

    return menu_modes(assistant.toolbox)


def mode_help(modes: Sequence[str]) -> str:
    """The help under the mode menu, built from the modes the index has (`page_modes`): auto first, the others by their
    short names; what the index lacks is not listed, only where more modes come from."""
    others = [label.split(" — ")[0] for label, mode in mode_choices(modes) if mode != AUTO]
    text = "auto: the agent plans the search (start here)"
    if others:
        text += f"; or pick one: {', '.join(others)}"
    if any(m not in modes for m in _menu()):
        text += ". More modes come with more index components or training (docs/usage.md, Your own data)"
    return text + "."


def formula_preview(latex: str | None) -> str:
    """The live preview under the formula input: the rendered formula and whether it can be read."""
    latex = (latex or "").strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if latex.startswith(left) and latex.endswith(right) and len(latex) > len(left) + len(right):
            latex = latex[len(left) : -len(right)].strip()
            break
    if not latex:
        return '<span class="ms-hint">Type LaTeX without dollar signs to see it rendered, then insert it into your question.</span>'
    if "$" in latex:
        return "**Note:** Leave out the `$` signs inside the formula: they are added when you insert it."
    shown = f"$${html.escape(' '.join(latex.split()), quote=False)}$$"
    problem = formula_problem(latex)
    if problem:
        return (
            f"{shown}\n\n**Note:** this formula can't be read completely ({html.escape(problem)}): check braces and "
            "`\\left`/`\\right` pairs. It can still be searched, as far as it can be read."
        )
    return f'{shown}\n\n<span class="ms-ok">readable formula</span>'


def insert_formula(question: str | None, latex: str | None) -> str:
    latex = (latex or "").strip().strip("$").strip()
    if not latex:
        return question or ""
    return f"{(question or '').rstrip()} ${latex}$".strip()


def page_search(
    pool: AssistantPool,
    allowance: LlmAllowance,
    client: str,
    message: str | None,
    history: list[dict] | None,
    state: SessionState | None,
    *,
    index_key: str | None,
    mode: str,
    k: int | str,
    rerank: str | bool | None,
) -> TurnOutput:
    """The page's "Search" button: one search through the one search service (`mathscout.ui.chat.search_turn`), an
    LLM reranker (or `auto` with an LLM) only as the server's allowance lets this client, as on GET /api/search."""
    llm, notices = False, []
    try:
        llm, notice = allowance.search(client, pool.assistant(index_key), rerank_kind(rerank))
        notices = [notice] if notice else []
    except LlmRefused as exc:
        return refused_turn(message, history, state, exc.refusal.notice("rerank with embedding or cross instead"))
    except MathScoutError:
        pass  # a bad option or index: the search says so, as it says everything else
    return search_turn(
        pool, message, history, state, index_key=index_key, mode=mode, k=k, rerank=rerank, llm=llm, notices=notices
    )


def build_app(pool: AssistantPool, allowance: LlmAllowance | None = None) -> gr.Blocks:
    """The page: chat with formula input and examples on the left; settings, results and trace on the right.
    `allowance` says who may have the LLM answer (default: the settings' policy)."""
    default = pool.assistant(None)
    llm_usable, llm_reason = default.llm_status
    choices = list(pool.choices.values())
    allowance = allowance or LlmAllowance()

    def respond(message, index_key, mode, k, rerank, use_llm, state, history, request: gr.Request):
        """One turn; the chat so far comes from the session's server-side state, never from the browser. The LLM
        answers when it is switched on and this client may use it now (else a note says why)."""
        notice = None
        if use_llm and llm_usable and (message or "").strip():
            use_llm, notice = allowance.question(address_of(request), default, True, None)
        first = True
        for out in run_turn(
            pool,
            message,
            history[-MAX_CHAT_MESSAGES:],
            state,
            index_key=index_key,
            mode=mode,
            k=k,
            rerank=rerank,
            use_llm=bool(use_llm) and llm_usable,
            notices=[notice] if notice else [],
        ):
            yield out.chat, out.results, out.trace, ("" if first else gr.skip()), out.state, out.chat
            first = False

    def search(message, index_key, mode, k, rerank, state, history, request: gr.Request):
        """One search (the "Search" button); the chat so far comes from the session's server-side state."""
        out = page_search(
            pool,
            allowance,
            address_of(request),
            message,
            history[-MAX_CHAT_MESSAGES:],
            state,
            index_key=index_key,
            mode=mode,
            k=k,
            rerank=rerank,
        )
        return out.chat, out.results, out.trace, "", out.state, out.chat

    def change_index(index_key):
        try:
            modes = page_modes(pool.assistant(index_key))
        except Exception as exc:  # an index that cannot be opened: say so, keep the page as it is
            log.exception("cannot open index %r", index_key)
            reason = str(exc) if isinstance(exc, MathScoutError) else f"{type(exc).__name__}: {exc}"
            gr.Warning(f"cannot open this index: {PathRedactor.of_pool(pool)(reason)}")
            return gr.update()
        return gr.update(
            choices=mode_choices(modes),
            value=MODE.default if MODE.default in modes else modes[0],
            info=mode_help(modes),
        )

    with gr.Blocks(title="MathScout") as app:
        state = gr.State(SessionState())
        history = gr.State([])  # the chat's messages: the browser's copy is only shown, never read back
        gr.HTML(
            '<div class="ms-header"><span class="ms-logo">MathScout</span> <span class="ms-tagline">math-aware '
            "answers with sources — ask in words and LaTeX (<code>$…$</code>); click a citation such as "
            "<code>[demo:algebra-004]</code> to see its document</span></div>"
        )
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=460):
                chatbot = gr.Chatbot(
                    elem_id="ms-chat",
                    height=560,
                    latex_delimiters=LATEX_DELIMITERS,
                    layout="bubble",
                    autoscroll=False,
                    label="Chat",
                    show_label=False,
                    feedback_options=None,
                    buttons=["copy"],
                    placeholder="<b>Ask a math question.</b><br>Answers appear here with rendered formulas and "
                    "citations; the documents behind them are listed under Search results.",
                )
                with gr.Row(equal_height=True):
                    question = gr.Textbox(
                        show_label=False,
                        lines=1,
                        max_lines=8,
                        scale=6,
                        elem_id="ms-question",
                        autofocus=True,
                        placeholder="e.g. How do I simplify $\\frac{t+1}{t}$?  (Enter sends, Shift+Enter: new line)",
                    )
                    send = gr.Button("Ask", variant="primary", scale=1, min_width=90, elem_id="ms-send")
                    find = gr.Button("Search", variant="secondary", scale=1, min_width=90, elem_id="ms-search")
                with gr.Accordion("Formula editor (live preview)", open=False, elem_id="ms-formula-panel"):
                    with gr.Row(equal_height=True):
                        formula = gr.Textbox(
                            label="LaTeX",
                            placeholder="\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}",
                            scale=4,
                            elem_id="ms-formula",
                        )
                        insert = gr.Button("Insert into question", scale=1, min_width=120, elem_id="ms-insert")
                    preview = gr.Markdown(
                        formula_preview(""), latex_delimiters=LATEX_DELIMITERS, elem_id="ms-formula-preview"
                    )
                questions = example_questions()
                examples = gr.Dataset(
                    components=[gr.Markdown(latex_delimiters=LATEX_DELIMITERS, render=False)],
                    samples=[[example_label(q)] for q in questions],
                    type="index",
                    layout="gallery",
                    label="Example questions (answered by the demo corpus) — click one, then Ask",
                    elem_id="ms-examples",
                    samples_per_page=MAX_EXAMPLES,
                )
            with gr.Column(scale=2, min_width=380):
                with gr.Accordion("Search settings", open=True, elem_id="ms-settings"):
                    index = gr.Dropdown(
                        [(c.label, c.key) for c in choices],
                        value=choices[0].key,
                        label="Index",
                        allow_custom_value=True,
                        elem_id="ms-index",
                        interactive=len(choices) > 1,
                        info=None if len(choices) > 1 else "one index available (start with --index DIR for more)",
                    )
                    mode = gr.Dropdown(
                        mode_choices(page_modes(default)),
                        value=MODE.default,
                        label="Search mode",
                        info=mode_help(page_modes(default)),
                        elem_id="ms-mode",
                    )
                    with gr.Row():
                        k = gr.Slider(1, MAX_K, value=10, step=1, label="Results (k)", elem_id="ms-k")
                        rerank = gr.Dropdown(
                            rerank_choices(), value="none", label="Rerank the results", elem_id="ms-rerank"
                        )
                    llm = gr.Checkbox(
                        llm_usable,
                        label="Use an LLM to plan and write the answer",
                        interactive=llm_usable,
                        info=llm_reason,
                        elem_id="ms-llm",
                    )
                gr.HTML('<div class="ms-section">Search results</div>')
                results = gr.Markdown(
                    EMPTY_RESULTS,
                    latex_delimiters=LATEX_DELIMITERS,
                    elem_id="ms-results",
                    max_height=620,
                    sanitize_html=True,
                )
                with gr.Accordion("How this answer was found (trace)", open=False, elem_id="ms-trace-panel"):
                    trace = gr.Markdown(EMPTY_TRACE, latex_delimiters=LATEX_DELIMITERS, elem_id="ms-trace")

        gr.on(
            [question.submit, send.click],
            respond,
            inputs=[question, index, mode, k, rerank, llm, state, history],
            outputs=[chatbot, results, trace, question, state, history],
            api_name="ask",
            concurrency_limit=CONCURRENCY,
            show_progress="hidden",
        ).then(None, js=SCROLL_TO_ANSWER, api_visibility="private", queue=False)  # the answer from its start
        find.click(
            search,
            inputs=[question, index, mode, k, rerank, state, history],
            outputs=[chatbot, results, trace, question, state, history],
            api_name="search",
            concurrency_limit=CONCURRENCY,
            show_progress="hidden",
        )
        chatbot.clear(
            lambda: (SessionState(), [], EMPTY_RESULTS, EMPTY_TRACE),
            None,
            [state, history, results, trace],
            api_visibility="private",
        )
        index.change(change_index, [index], [mode], api_visibility="private", show_progress="hidden")
        formula.change(
            formula_preview,
            [formula],
            [preview],
            show_progress="hidden",
            trigger_mode="always_last",
            api_visibility="private",
            concurrency_limit=None,
        )
        examples.click(
            lambda i: questions[i] if i is not None and 0 <= i < len(questions) else gr.skip(),
            [examples],
            [question],
            api_visibility="private",
            queue=False,
            show_progress="hidden",
        )
        insert.click(insert_formula, [question, formula], [question], api_visibility="private", concurrency_limit=None)
    return app


def warm_up(pool: AssistantPool) -> list[str]:
    """Search with every mode of every offered index before the server listens (the JVM, the structure index, models
    and rankers load now, not on a visitor's first question); "index/mode" of each mode that failed to warm up."""
    failed = []
    for key in pool.choices:
        assistant = pool.assistant(key)  # an index that cannot even be opened stops `serve` here
        for mode in assistant.modes():
            started = time.perf_counter()
            try:
                for question in WARM_UP_QUESTIONS:  # a formula and words: every part of the mode is opened
                    if mode == AUTO:  # the planner's searches, as a question runs them
                        assistant.ask(question, mode=AUTO, k=3, use_llm=False)
                    else:
                        with contextlib.suppress(QueryError):  # a mode that needs a formula refuses the words
                            assistant.search(question, mode=mode, k=3)
            except Exception as exc:  # noqa: BLE001 — the page still starts; that mode's first search will show the problem
                log.warning("warm-up of %s/%s failed: %s", key, mode, exc)
                failed.append(f"{key}/{mode}")
            log.info("warmed %s/%s in %.1f s", key, mode, time.perf_counter() - started)
        failed += _warm_reranker(key, assistant)
    return failed


def _warm_reranker(key: str, assistant) -> list[str]:
    """Rerank a few hits with the reranker the page's "Rerank the results" uses without an LLM (the index's cross-
    encoder when it has one, else local embeddings), so its model loads now, not during a visitor's question;
    ["index/rerank-KIND"] when that failed."""
    toolbox = assistant.toolbox
    modes = [m for m in assistant.modes() if m != AUTO]
    if "rerank" not in toolbox.available() or not modes:
        return []
    kind, started = toolbox.local_reranker(), time.perf_counter()
    try:
        assistant.search(WARM_UP_QUESTIONS[-1], mode=toolbox.text_mode() or modes[0], k=3, rerank=kind, rerank_depth=3)
    except Exception as exc:  # noqa: BLE001 — the page still starts; a reranked question will show the problem
        log.warning("warm-up of %s's %s reranker failed: %s", key, kind, exc)
        return [f"{key}/rerank-{kind}"]
    log.info("warmed %s's %s reranker in %.1f s", key, kind, time.perf_counter() - started)
    return []


def _listen(site, host: str, port: int, started: float, said: str, on_ready=None) -> None:
    """Serve `site` with uvicorn; `said` and "ready" are printed, and `on_ready()` called, once the socket listens.
    A request uvicorn cannot parse (a URL or head over MAX_REQUEST_HEAD_BYTES, not HTTP) gets the API's JSON error."""
    import uvicorn

    from mathscout.limits import MAX_REQUEST_HEAD_BYTES
    from mathscout.ui.http_protocol import JsonErrorsH11Protocol

    class Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                if on_ready is not None:
                    on_ready()
                print(f"MathScout: ready in {time.perf_counter() - started:.1f} s: {said}", flush=True)

    Server(
        uvicorn.Config(
            site,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            http=JsonErrorsH11Protocol,
            h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
        )
    ).run()


def serve(
    index_paths: Sequence[Path] = (),
    *,
    host: str = "127.0.0.1",
    port: int = 7860,
    public: bool = False,
    share: bool = False,
    auth: str | None = None,
    use_llm: bool | None = None,
    quiet: bool = False,
    allow_hosts: Sequence[str] = (),
    llm: LlmPolicy | None = None,
) -> None:
    """Start the page and block until interrupted. Non-local binding and share links need `public=True`. The site
    answers requests for localhost, 127.0.0.1, [::1], `host` and `allow_hosts` (`mathscout.ui.hosts`); `llm` says
    who may have the LLM answer (default: the settings' policy; `mathscout.ui.llm_allowance`)."""
    if host not in LOCAL_HOSTS and not public:
        raise MathScoutError(
            f"binding to {host} makes the page reachable from other machines: add --public to "
            "confirm (and consider --auth user:password)"
        )
    if share and not public:
        raise MathScoutError(
            "--share opens a public gradio.live link: add --public to confirm (and consider --auth user:password)"
        )
    credentials = None
    if auth:
        user, sep, password = auth.partition(":")
        if not sep or not user or not password:
            raise MathScoutError("--auth needs USER:PASSWORD (both non-empty)")
        credentials = LoginGuard(user, password)
    hosts = HostPolicy.for_server(host, allow_hosts)
    policy = llm or LlmPolicy.configured(share=share)
    if public and credentials is None:
        print(
            "MathScout: warning: --public without --auth: anyone who can reach this address can use the page "
            f"(and the LLM: {policy.who()}); add --auth USER:PASSWORD",
            file=sys.stderr,
            flush=True,
        )
    started = time.perf_counter()
    settings = services.settings_fingerprint()  # as this server starts: its record says what decides its results
    pool = AssistantPool(discover_indexes(index_paths), use_llm=use_llm)
    failed = warm_up(pool)
    if failed:
        print(
            f"MathScout: warning: these modes failed to warm up and may fail on first use: {', '.join(failed)}",
            file=sys.stderr,
            flush=True,
        )
    allowance = LlmAllowance(policy)
    print(f"MathScout: {allowance.describe(*pool.assistant(None).llm_status)}", flush=True)
    cache, record = private_cache(), None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # (re-raised by uvicorn after its
    try:  # shutdown) a SIGTERM then ends the process through the `finally` below, which removes the cache and record
        if share:  # Gradio's share link needs its own launch: the page only
            print(
                f"MathScout: serving {', '.join(pool.choices)} on http://{host}:{port} and a gradio.live link "
                f"(the JSON API is not served with --share){_stops()}",
                flush=True,
            )
            build_app(pool, allowance).queue(default_concurrency_limit=CONCURRENCY).launch(
                server_name=host,
                server_port=port,
                share=True,
                quiet=quiet,
                auth=credentials.check if credentials else None,
                inbrowser=False,
                **LOOK,
            )
            return
        _check_port(host, port)
        site = build_site(pool, credentials, hosts, allowance)
        modes = sum(len(pool.assistant(key).modes()) for key in pool.choices)

        def register() -> None:  # the command line of this OS user finds the server (mathscout.ui.services)
            nonlocal record
            record = services.register(host, port, {c.key: c.path for c in pool.choices.values()}, settings)

        _listen(
            site,
            host,
            port,
            started,
            f"serving {', '.join(pool.choices)} ({modes} search modes warmed) on "
            f"http://{host}:{port} (page), http://{host}:{port}/api (JSON API, docs at /docs){_stops()}",
            register,
        )
    finally:
        services.unregister(record)
        shutil.rmtree(cache, ignore_errors=True)


def _stops() -> str:
    """' (Ctrl-C stops)' for a server in the foreground of a terminal; nothing in the background or a service."""
    try:
        return " (Ctrl-C stops)" if sys.stdin.isatty() and os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp() else ""
    except (AttributeError, OSError, ValueError):  # no terminal, stdin closed or replaced
        return ""


def private_cache() -> str:
    """A fresh folder of this server's own as Gradio's file caches (GRADIO_TEMP_DIR, inside the one given if
    any, and GRADIO_EXAMPLES_CACHE, else ./.gradio/cached_examples): the page's file routes then serve nothing
    another program or an earlier server left there."""
    from mathscout.settings import settings

    cache = tempfile.mkdtemp(prefix="mathscout-page-", dir=settings().gradio_temp_dir)
    os.environ.update(GRADIO_TEMP_DIR=cache, GRADIO_EXAMPLES_CACHE=os.path.join(cache, "examples"))
    return cache


def build_site(
    pool: AssistantPool,
    guard: LoginGuard | None = None,
    hosts: HostPolicy | None = None,
    llm: LlmAllowance | None = None,
):
    """The JSON API with the page mounted on it (one ASGI app). The page takes no files from a request: Gradio
    checks that every file a request names was uploaded to its cache only once its Blocks has launched, which a
    mounted Blocks never does, so it is marked launched; the index folders are blocked paths too. Every route
    answers only the hosts of `hosts` (default: localhost, 127.0.0.1, [::1]); `llm` as `build_app`'s allowance."""
    from mathscout.ui.http_api import create_api

    allowance = llm or LlmAllowance()
    app = build_app(pool, allowance).queue(default_concurrency_limit=CONCURRENCY)
    site = gr.mount_gradio_app(
        create_api(pool, guard, allowance),
        app,
        path="/",
        auth=guard.check if guard else None,
        blocked_paths=[str(c.path.resolve()) for c in pool.choices.values()],
        run_history=False,
        **LOOK,
    )
    app.has_launched = True
    policy = hosts or HostPolicy()
    site.add_middleware(CrossSiteCheck, policy=policy)  # another website's requests (CSRF), after the Host check
    site.add_middleware(HostCheck, policy=policy)  # added later, so it runs first: before the login and the body
    site.add_middleware(AccessLog)  # outermost: one line per request, refused ones too (logged at info)
    return site


def _check_port(host: str, port: int) -> None:
    """A clear error before start-up when the address is taken (uvicorn would only log it)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise MathScoutError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port"
            ) from exc
