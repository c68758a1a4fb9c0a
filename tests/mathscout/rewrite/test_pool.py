"""The SymPy workers under slow requests (issue 42 item 4): a request waits for a worker at most its own time limit,
and one client's slow computations never hold another client's request (real worker processes, no timing bars:
each test asserts which request finished first)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mathscout.rewrite.pool import WorkerPool, WorkerReply

SLOW = r"x^{97}+x^{53}+%dx^{31}+x+1=0"  # solve runs into any time limit (SymPy factors a degree-97 polynomial)
PLAIN = r"\frac{t+1}{t}"


def _timed(pool: WorkerPool, latex: str, seconds: float, op: str, client: str) -> tuple[WorkerReply, float]:
    reply = pool.run(latex, None, seconds, op=op, client=client)
    return reply, time.monotonic()


@pytest.fixture
def warm_pool(request):
    """A pool of `request.param` workers, warmed by one quick request."""
    pool = WorkerPool(size=request.param)
    assert pool.run(PLAIN, None, 60.0).forms  # start-up is not charged: this waits for SymPy's import
    yield pool
    pool.close()


@pytest.mark.parametrize("warm_pool", [1], indirect=True)
def test_a_request_waits_for_a_worker_at_most_its_own_time_limit(warm_pool):
    with ThreadPoolExecutor(2) as threads:
        slow = threads.submit(_timed, warm_pool, SLOW % 2, 6.0, "solve", "a")
        time.sleep(0.3)  # the slow request holds the only worker
        quick = threads.submit(_timed, warm_pool, PLAIN, 1.0, "rewrite", "b")
        (quick_reply, quick_done), (slow_reply, slow_done) = quick.result(), slow.result()
    assert "busy" in (quick_reply.stopped or "") and not quick_reply.forms, quick_reply
    assert quick_done < slow_done  # it was told so within its limit, not after the slow one
    assert "time limit of 6 s" in (slow_reply.stopped or "")  # the slow one stopped at its own limit
    assert warm_pool.run(PLAIN, None, 30.0).forms  # its worker was killed and replaced


@pytest.mark.parametrize("warm_pool", [4], indirect=True)
def test_one_clients_slow_computations_do_not_hold_another_clients_request(warm_pool):
    with ThreadPoolExecutor(7) as threads:
        slow = [threads.submit(_timed, warm_pool, SLOW % n, 5.0, "solve", "a") for n in range(2, 8)]
        time.sleep(0.3)
        quick_reply, quick_done = threads.submit(_timed, warm_pool, PLAIN, 5.0, "rewrite", "b").result()
        slow_done = [future.result()[1] for future in slow]
    assert quick_reply.forms and quick_reply.stopped is None, quick_reply
    assert quick_done < min(slow_done)  # answered while all six ran (or waited) their time
    assert warm_pool.workers <= 4


@pytest.mark.parametrize("warm_pool", [2], indirect=True)
def test_workers_are_reused_not_restarted_by_quick_requests(warm_pool):
    for _ in range(5):
        assert warm_pool.run(PLAIN, None, 30.0).forms
    threads = [threading.Thread(target=warm_pool.run, args=(PLAIN, None, 30.0)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert warm_pool.restarts == 0 and warm_pool.workers <= 2
