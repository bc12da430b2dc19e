"""The progress bar: drawn on a terminal (or when forced), silent otherwise; keygen ticks it."""
import io

from cuzk._circuit import porep_like
from cuzk._keygen import KEYGEN_STEPS, keygen_random
from cuzk._progress import Progress


def test_silent_when_not_a_terminal():
    buf = io.StringIO()
    with Progress("work", 3, stream=buf) as p:
        p.update(3)
    assert buf.getvalue() == "" and p.done == 3


def test_keygen_reports_every_step():
    r1cs, _, _ = porep_like(6, 1)
    buf = io.StringIO()
    with Progress("keygen", KEYGEN_STEPS, force=True, stream=buf) as p:
        keygen_random(r1cs, seed=1, progress=p)
    assert p.done == KEYGEN_STEPS
    assert f"{KEYGEN_STEPS}/{KEYGEN_STEPS}" in buf.getvalue()
    assert buf.getvalue().endswith("\n")
