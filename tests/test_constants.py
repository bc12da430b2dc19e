"""cuzk/_constants.py: derived and checked by scripts/gen_constants.py; one place per fact."""
import importlib.util
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from cuzk import _constants as K
from cuzk._native import _field

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gen_constants.py"


def _script():
    spec = importlib.util.spec_from_file_location("gen_constants", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_script_checks_header_and_module():
    r = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("ok")


@pytest.mark.parametrize("name", ["FR_MODULUS", "FQ_MONT_R_INV", "FR_TWO_ADICITY", "FR_GENERATOR"])
def test_script_catches_a_wrong_literal(tmp_path, name):
    src = (ROOT / "cuzk" / "_constants.py").read_text()
    bad, n = re.subn(rf"^({name} = )(\S+)$", lambda m: m.group(1) + str(int(m.group(2), 0) + 2),
                     src, count=1, flags=re.M)
    assert n == 1
    (tmp_path / "_constants.py").write_text(bad)
    assert _script().check_py(tmp_path / "_constants.py") == 1


def test_module_agrees_with_native_field():
    assert K.FR_MODULUS == _field.FR_MODULUS
    assert K.FQ_MODULUS == _field.FQ_MODULUS
    one = np.array([[1, 0, 0, 0]], dtype=np.uint64)
    assert K.fr_mont_to_ints(_field.to_mont(one, "fr")) == [1]
    assert int.from_bytes(_field.to_mont(one, "fr").tobytes(), "little") == K.FR_MONT_R


def test_fr_conversions_round_trip_against_native():
    vals = [0, 1, 2, K.FR_MODULUS - 1, K.FR_MODULUS // 3, 1 << 254, 12345678901234567890]
    mont = K.fr_ints_to_mont(vals)
    canon = np.array([[(v >> (64 * i)) & (2**64 - 1) for i in range(4)] for v in vals],
                     dtype=np.uint64)
    assert mont.tobytes() == _field.to_mont(canon, "fr").tobytes()
    assert K.fr_mont_to_ints(mont) == vals
    assert [K.fr_from_mont_int(K.fr_to_mont_int(v)) for v in vals] == vals
    with pytest.raises(ValueError, match="value 1 is not in"):
        K.fr_ints_to_mont([0, K.FR_MODULUS])


def test_fq_conversions():
    for v in (0, 1, K.FQ_MODULUS - 1, 2**383 % K.FQ_MODULUS):
        m = K.fq_to_mont_int(v)
        assert m == v * 2**384 % K.FQ_MODULUS
        assert K.fq_from_mont_int(m) == v


@pytest.mark.parametrize("gen", [K.FR_GENERATOR, K.SNARKJS_FR_GENERATOR])
@pytest.mark.parametrize("log_n", [0, 1, 5, 27, 32])
def test_root_of_unity_has_exact_order(log_n, gen):
    w = K.fr_root_of_unity(log_n, gen)
    assert pow(w, 1 << log_n, K.FR_MODULUS) == 1
    if log_n:
        assert pow(w, 1 << (log_n - 1), K.FR_MODULUS) == K.FR_MODULUS - 1


@pytest.mark.parametrize("bad", [-1, 33, 2.0, True, None])
def test_root_of_unity_rejects_bad_log_n(bad):
    with pytest.raises(ValueError, match="log_n"):
        K.fr_root_of_unity(bad)


def test_fr_modulus_written_once_in_python():
    """No Python module of the package spells r or p out again (the C/CUDA headers are
    generated and checked by the scripts)."""
    lits = ("73eda753299d7d48", "1a0111ea397fe69a")
    offenders = []
    for p in sorted((ROOT / "cuzk").rglob("*")):
        if p.suffix not in (".py", ".pyx", ".pxd") or p.name == "_constants.py":
            continue
        text = p.read_text(encoding="utf-8").lower()
        offenders += [f"{p.relative_to(ROOT)}: {lit}" for lit in lits if lit in text]
    assert not offenders, offenders
