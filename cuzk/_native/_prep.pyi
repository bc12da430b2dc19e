import numpy as np

__all__ = ["prep_msm"]

def prep_msm(inputs: np.ndarray, aux: np.ndarray, a_aux: np.ndarray, b_input: np.ndarray,
             b_aux: np.ndarray, threads: int | None = 0, form: str = "canonical") -> dict: ...
