"""Progress: a bar on a terminal, whole lines (periodic + final) anywhere else, silence only when
disabled; keygen ticks it; a closed stream never breaks the work."""
import io
import time

from cuzk._circuit import porep_like
from cuzk._keygen import KEYGEN_STEPS, keygen_random
from cuzk._progress import Progress


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_lines_when_not_a_terminal():
    # before: nothing at all was written unless stderr was a TTY (a piped keygen was silent)
    buf = io.StringIO()
    with Progress("work", 3, stream=buf, interval=0.05) as p:
        p.update()
        time.sleep(0.12)
        p.update(2)
    out = buf.getvalue()
    assert "\r" not in out and out.endswith("\n")
    assert out.splitlines()[0].startswith("work: 1/3 (33%)")
    assert out.splitlines()[-1].startswith("work: done 3/3 in ")


def test_short_work_is_silent_in_line_style():
    buf = io.StringIO()
    with Progress("work", 3, stream=buf, interval=60) as p:
        p.update(3)
    assert buf.getvalue() == "" and p.done == 3


def test_periodic_lines_while_work_lasts():
    buf = io.StringIO()
    with Progress("load", 1, stream=buf, interval=0.05):
        time.sleep(0.4)                      # no update at all: the heartbeat still reports
    lines = buf.getvalue().splitlines()
    assert len(lines) >= 3, lines
    assert all(ln.startswith("load: 0/1 (0%)") for ln in lines[:-1])
    assert lines[-1].startswith("load: done 0/1")        # never updated: says so


def test_bar_on_a_terminal():
    buf = _Tty()
    with Progress("work", 4, stream=buf) as p:
        for _ in range(4):
            p.update()
    out = buf.getvalue()
    assert out.startswith("\rwork [") and "4/4" in out and out.endswith("\n")


def test_failure_ends_the_bar_and_adds_no_line():
    buf = _Tty()
    try:
        with Progress("prove", 3, stream=buf) as p:
            p.update()
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert buf.getvalue().endswith("1/3    0.0s failed\n")
    buf = io.StringIO()
    try:
        with Progress("prove", 3, stream=buf, interval=0.05) as p:
            time.sleep(0.08)
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    lines = buf.getvalue().splitlines()
    assert lines and not any("done" in ln for ln in lines)   # the error message says the rest


def test_disabled_is_silent():
    buf = io.StringIO()
    with Progress("work", 3, enabled=False, stream=buf, interval=0.01) as p:
        p.update(3)
        time.sleep(0.05)
    assert buf.getvalue() == "" and p.done == 3


def test_closed_stream_is_not_fatal():
    buf = io.StringIO()
    with Progress("work", 2, stream=buf, interval=0.0) as p:
        buf.close()
        p.update(2)                          # must not raise
    assert p.done == 2


def test_keygen_reports_every_step():
    r1cs, _, _ = porep_like(6, 1)
    buf = io.StringIO()
    with Progress("keygen", KEYGEN_STEPS, force=True, stream=buf) as p:
        keygen_random(r1cs, seed=1, progress=p)
    assert p.done == KEYGEN_STEPS
    assert f"{KEYGEN_STEPS}/{KEYGEN_STEPS}" in buf.getvalue()
    assert buf.getvalue().endswith("\n")
