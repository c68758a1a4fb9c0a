"""The page's CSS, and the script that makes citations jump to their hit cards."""

CSS = """
.ms-header { display: flex; align-items: baseline; gap: .8em; flex-wrap: wrap; padding: 2px 4px 0; }
.ms-logo { font-size: 1.55em; font-weight: 700; color: var(--color-accent); letter-spacing: -.01em; }
.ms-tagline { color: var(--body-text-color-subdued); font-size: .95em; }
.ms-section { font-weight: 600; font-size: 1.02em; margin: 6px 2px -4px; }
#ms-results { padding-right: 4px; }
.ms-empty, .ms-hint { color: var(--body-text-color-subdued); font-size: .92em; }
.ms-ok { color: #2b8a3e; font-size: .88em; }
.ms-turn-question { font-weight: 600; margin: 2px 0 8px; color: var(--body-text-color-subdued);
                    display: -webkit-box; -webkit-line-clamp: 2; -webkit-box-orient: vertical; overflow: hidden; }
details.ms-turn-earlier > summary { cursor: pointer; color: var(--body-text-color-subdued); margin: 8px 0; }
.ms-hit { border: 1px solid var(--border-color-primary); border-radius: 10px; padding: 10px 12px;
          margin: 0 0 10px; background: var(--background-fill-primary); scroll-margin: 12px; }
.ms-hit.ms-flash { animation: ms-flash 2.4s ease-out; }
@keyframes ms-flash { 0%, 35% { box-shadow: 0 0 0 3px #f59f00; background: #fff9db; } 100% { box-shadow: none; } }
.ms-hit-head { font-weight: 600; line-height: 1.35; }
.ms-rank { display: inline-block; min-width: 1.7em; padding: 0 .35em; border-radius: 1em; margin-right: .3em;
           background: var(--color-accent); color: white; text-align: center; font-size: .8em; }
.ms-meta { color: var(--body-text-color-subdued); font-size: .84em; margin-top: 2px; }
.ms-meta code { font-size: .95em; padding: 0 3px; }
.ms-scores { margin: 5px 0 2px; }
.ms-score { display: inline-block; font-size: .76em; padding: 0 8px; margin: 0 4px 3px 0; border-radius: 1em;
            background: var(--background-fill-secondary); border: 1px solid var(--border-color-primary); }
.ms-score-main { background: var(--color-accent-soft); font-weight: 600; }
.ms-formula { overflow-x: auto; overflow-y: hidden; margin: 2px 0; }
.ms-formula .katex-display { margin: .25em 0; text-align: left; }
.ms-formula .katex-display > .katex { text-align: left; }
.ms-formula-source code { white-space: pre-wrap; overflow-wrap: anywhere; font-size: .85em; }
.ms-formula .katex-error { white-space: pre-wrap; overflow-wrap: anywhere; font-family: monospace; font-size: .85em; }
.ms-snippet { font-size: .92em; line-height: 1.5; }
.ms-snippet .katex-display, .ms-full .katex-display { overflow-x: auto; overflow-y: hidden; padding: 2px 0; }
.ms-snippet mark, .ms-formula-source mark { background: #ffec99; color: inherit; padding: 0 1px; border-radius: 2px; }
details.ms-full > summary { cursor: pointer; color: var(--body-text-color-subdued); font-size: .84em; margin-top: 4px; }
details.ms-full > div { font-size: .9em; line-height: 1.5; margin-top: 4px; }
#ms-chat a[href^="#hit-"] { text-decoration: none; border-bottom: 1px dotted currentColor; font-size: .92em; }
#ms-trace table { font-size: .85em; }
"""

# Citations are links to `#hit-<turn>-<rank>`: scroll the card into view (opening folded sections) and flash it.
HEAD = """
<script>
document.addEventListener("click", function (event) {
  var link = event.target.closest && event.target.closest('a[href^="#hit-"]');
  if (!link) return;
  event.preventDefault();
  event.stopPropagation();
  var card = document.getElementById(link.getAttribute("href").slice(1));
  if (!card) { alert("That result is no longer listed: only the last questions' results are kept."); return; }
  for (var p = card.parentElement; p; p = p.parentElement) { if (p.tagName === "DETAILS") p.open = true; }
  card.scrollIntoView({behavior: "smooth", block: "start"});
  card.classList.remove("ms-flash"); void card.offsetWidth; card.classList.add("ms-flash");
}, true);
</script>
"""

# After an answer has streamed: show it from its start (the question heading it at the top of the chat), not its end.
SCROLL_TO_ANSWER = """
() => { const show = () => {
  const chat = document.getElementById("ms-chat");
  if (!chat) return;
  const asked = chat.querySelectorAll(".message-row.user-row, .user-row, [data-testid='user']");
  const last = asked[asked.length - 1];
  if (!last) return;
  let scroller = last.parentElement;  // the chat's own scrolling box: the page itself does not move
  while (scroller && scroller !== chat.parentElement && !(scroller.scrollHeight > scroller.clientHeight + 1 &&
         /(auto|scroll)/.test(getComputedStyle(scroller).overflowY))) scroller = scroller.parentElement;
  if (!scroller || scroller === chat.parentElement) return;
  scroller.scrollTop += last.getBoundingClientRect().top - scroller.getBoundingClientRect().top - 8;
};  // after the last update is drawn (formulas typeset): now, and again once rendering settled
  requestAnimationFrame(show); setTimeout(show, 150); setTimeout(show, 600);
}
"""
