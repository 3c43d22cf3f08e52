"""Proximal operators (algorithms/prox.py) against generic solvers on random instances.

Generic solvers (scipy.optimize, no convex-programming package):
- l1 prox, l1 prox + ball, constrained l1 prox: SLSQP on the smooth split w = a - b, a, b >= 0
  (and d >= |w - w0| for the l1-ball constraint), ftol 1e-14;
- nuclear prox (SVT): L-BFGS on the factorisation W = A B^T, where
  ||W||_* = min 1/2(||A||^2 + ||B||^2) over A B^T = W (smooth, full-rank factors);
- constrained nuclear prox (Dykstra): on instances V = Q diag(v) P^T, W0 = Q diag(c) P^T the
  solution is Q diag(x) P^T with x the constrained l1 prox of (v, c) (unitary invariance plus
  the sign-flip symmetry), checked against the SLSQP solution of that vector problem.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from torch.func import vmap

from algorithms.prox import (
    Regularizer,
    cprox,
    dykstra,
    l1_ball_project,
    l1_multiplier,
    prox,
    reg_value,
    soft_threshold,
    svt,
)

TOL = 1e-6


def _t(x):
    return torch.as_tensor(np.asarray(x, dtype=np.float64))


def slsqp_l1(v, tau, radius=math.inf, anchor=None, eps=math.inf):
    """min 1/2||w - v||^2 + tau||w||_1 s.t. ||w|| <= radius, ||w - anchor||_1 <= eps (SLSQP)."""
    v = np.asarray(v, dtype=np.float64)
    n = len(v)
    constrained = anchor is not None and math.isfinite(eps)
    size = 3 * n if constrained else 2 * n

    def split(z):
        return z[:n] - z[n : 2 * n], z[2 * n :] if constrained else None

    def obj(z):
        w, _ = split(z)
        return 0.5 * np.sum((w - v) ** 2) + tau * np.sum(z[: 2 * n])

    def grad(z):
        w, _ = split(z)
        g = np.zeros(size)
        g[:n] = (w - v) + tau
        g[n : 2 * n] = -(w - v) + tau
        return g

    cons = []
    if math.isfinite(radius):
        cons.append(
            {
                "type": "ineq",
                "fun": lambda z: radius**2 - np.sum(split(z)[0] ** 2),
                "jac": lambda z: np.concatenate([-2 * split(z)[0], 2 * split(z)[0], np.zeros(size - 2 * n)]),
            }
        )
    if constrained:
        eye = np.eye(n)
        # d - (w - c) >= 0, d + (w - c) >= 0, eps - sum d >= 0
        cons.append(
            {
                "type": "ineq",
                "fun": lambda z: z[2 * n :] - (split(z)[0] - anchor),
                "jac": lambda z: np.hstack([-eye, eye, eye]),
            }
        )
        cons.append(
            {
                "type": "ineq",
                "fun": lambda z: z[2 * n :] + (split(z)[0] - anchor),
                "jac": lambda z: np.hstack([eye, -eye, eye]),
            }
        )
        cons.append(
            {
                "type": "ineq",
                "fun": lambda z: np.array([eps - np.sum(z[2 * n :])]),
                "jac": lambda z: np.concatenate([np.zeros(2 * n), -np.ones(n)])[None, :],
            }
        )
    # a feasible start: w = anchor (or 0), d = 0
    z0 = np.zeros(size)
    if constrained:
        z0[:n] = np.maximum(anchor, 0)
        z0[n : 2 * n] = np.maximum(-anchor, 0)
    res = minimize(
        obj,
        z0,
        jac=grad,
        method="SLSQP",
        bounds=[(0, None)] * size,
        constraints=cons,
        options={"ftol": 1e-14, "maxiter": 2000},
    )
    # status 8 ("positive directional derivative") is SLSQP stopping at its precision limit
    assert res.status in (0, 8), res.message
    return split(res.x)[0], res.fun


def objective(w, v, tau, reg):
    return float(0.5 * torch.sum((w - v) ** 2) + tau * reg_value(w, reg))


def test_soft_threshold_matches_slsqp():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(2, 30))
        v = rng.normal(0, 2, n)
        tau = float(rng.uniform(0.05, 2))
        ref, ref_obj = slsqp_l1(v, tau)
        ours = soft_threshold(_t(v), tau)
        assert np.max(np.abs(ours.numpy() - ref)) <= TOL
        assert objective(ours, _t(v), tau, Regularizer("l1")) <= ref_obj + 1e-9


def test_l1_prox_with_ball_matches_slsqp():
    rng = np.random.default_rng(1)
    active = 0
    for _ in range(20):
        n = int(rng.integers(2, 30))
        v = rng.normal(0, 2, n)
        tau = float(rng.uniform(0.05, 1))
        radius = float(rng.uniform(0.3, 1.5) * np.linalg.norm(v))
        reg = Regularizer("l1", radius=radius)
        ours = prox(_t(v), tau, reg)
        ref, ref_obj = slsqp_l1(v, tau, radius=radius)
        active += bool(np.linalg.norm(np.sign(v) * np.maximum(np.abs(v) - tau, 0)) > radius)
        assert np.max(np.abs(ours.numpy() - ref)) <= TOL
        ref = ref * min(1.0, radius / np.linalg.norm(ref))  # SLSQP may sit a hair outside the ball
        assert objective(ours, _t(v), tau, reg) <= objective(_t(ref), _t(v), tau, reg) + 1e-9
    assert active >= 5  # the ball was binding in a good share of instances


def test_partial_block_leaves_the_rest_alone():
    v = _t([3.0, -0.2, 0.5, -4.0, 7.0])
    out = prox(v, 1.0, Regularizer("l1", coords=3))
    assert torch.allclose(out, _t([2.0, 0.0, 0.0, -4.0, 7.0]))


def _svt_generic(v: np.ndarray, tau: float) -> np.ndarray:
    """min_{A,B} 1/2||A B^T - V||^2 + tau/2 (||A||^2 + ||B||^2) by L-BFGS; returns A B^T."""
    m, n = v.shape
    k = min(m, n)
    rng = np.random.default_rng(7)

    def f(z):
        a, b = z[: m * k].reshape(m, k), z[m * k :].reshape(n, k)
        r = a @ b.T - v
        val = 0.5 * np.sum(r**2) + 0.5 * tau * (np.sum(a**2) + np.sum(b**2))
        return val, np.concatenate([(r @ b + tau * a).ravel(), (r.T @ a + tau * b).ravel()])

    best = None
    for _ in range(3):  # a few starts; the factorised problem has no spurious minima at full rank
        res = minimize(
            f,
            rng.normal(0, 1, (m + n) * k),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": 20000, "ftol": 1e-16, "gtol": 1e-13, "maxcor": 50},
        )
        if best is None or res.fun < best.fun:
            best = res
    a, b = best.x[: m * k].reshape(m, k), best.x[m * k :].reshape(n, k)
    return a @ b.T


def test_svt_matches_factorised_lbfgs():
    rng = np.random.default_rng(2)
    for _ in range(6):
        m, n = int(rng.integers(2, 6)), int(rng.integers(2, 6))
        v = rng.normal(0, 1, (m, n))
        s = np.linalg.svd(v, compute_uv=False)
        tau = float(rng.uniform(0.2, 0.9) * s.max())
        ours = svt(_t(v), tau).numpy()
        ref = _svt_generic(v, tau)
        assert np.max(np.abs(ours - ref)) <= TOL
        reg = Regularizer("nuclear", shape=(m, n))
        assert (
            objective(_t(ours).reshape(-1), _t(v).reshape(-1), tau, reg)
            <= objective(_t(ref).reshape(-1), _t(v).reshape(-1), tau, reg) + 1e-9
        )


def test_nuclear_prox_with_ball_on_rotated_diagonal_instances():
    """On V = Q diag(v) P^T the nuclear prox with a Frobenius ball is Q diag(x) P^T, x the l1 prox
    with an l2 ball of v (unitary invariance and sign symmetry), checked against SLSQP."""
    rng = np.random.default_rng(3)
    for _ in range(5):
        k = int(rng.integers(2, 6))
        vd = rng.normal(0, 2, k)
        tau = float(rng.uniform(0.05, 0.5))
        u = np.sign(vd) * np.maximum(np.abs(vd) - tau, 0)
        radius = float(rng.uniform(0.3, 0.8) * np.linalg.norm(u))  # the ball is binding
        ref_vec, _ = slsqp_l1(vd, tau, radius=radius)
        q, _ = np.linalg.qr(rng.normal(size=(k, k)))
        p, _ = np.linalg.qr(rng.normal(size=(k, k)))
        reg = Regularizer("nuclear", shape=(k, k), radius=radius)
        out = prox(_t(q @ np.diag(vd) @ p.T).reshape(-1), tau, reg)
        assert np.max(np.abs(out.numpy().reshape(k, k) - q @ np.diag(ref_vec) @ p.T)) <= TOL
        assert float(out.norm()) <= radius * (1 + 1e-12)


def test_constrained_l1_prox_matches_slsqp_including_active_constraints():
    rng = np.random.default_rng(4)
    active = 0
    for _ in range(30):
        n = int(rng.integers(2, 30))
        v = rng.normal(0, 2, n)
        c = rng.normal(0, 1.5, n) * (rng.random(n) < 0.7)
        tau = float(rng.uniform(0.05, 1))
        u = np.sign(v) * np.maximum(np.abs(v) - tau, 0)
        dist = np.abs(u - c).sum()
        eps = float(rng.uniform(0.1, 1.3) * dist)
        active += dist > eps
        reg = Regularizer("l1")
        ours = cprox(_t(v), tau, _t(c), eps, reg)
        ref, ref_obj = slsqp_l1(v, tau, anchor=c, eps=eps)
        assert np.max(np.abs(ours.numpy() - ref)) <= TOL
        assert float(reg_value(ours - _t(c), reg)) <= eps * (1 + 1e-9)
        assert objective(ours, _t(v), tau, reg) <= ref_obj + 1e-9
        # Dykstra agrees with the exact multiplier search
        dyk = dykstra(_t(v), tau, _t(c), eps, reg, iters=20000, tol=1e-11)
        assert np.max(np.abs(dyk.numpy() - ours.numpy())) <= 1e-6
    assert active >= 15


def test_constrained_l1_prox_with_ball_matches_slsqp():
    rng = np.random.default_rng(5)
    for _ in range(10):
        n = int(rng.integers(2, 20))
        v = rng.normal(0, 2, n)
        c = rng.normal(0, 1, n)
        tau = float(rng.uniform(0.05, 1))
        radius = float(rng.uniform(0.5, 1.2) * np.linalg.norm(v))
        u = np.sign(v) * np.maximum(np.abs(v) - tau, 0)
        eps = float(rng.uniform(0.2, 0.9) * np.abs(u - c).sum())
        reg = Regularizer("l1", radius=radius)
        ours = cprox(_t(v), tau, _t(c), eps, reg, iters=20000, tol=1e-11)
        ref, ref_obj = slsqp_l1(v, tau, radius=radius, anchor=c, eps=eps)
        assert np.max(np.abs(ours.numpy() - ref)) <= TOL
        assert objective(ours, _t(v), tau, reg) <= ref_obj + 1e-9


def test_constrained_nuclear_prox_on_rotated_diagonal_instances():
    rng = np.random.default_rng(6)
    for _ in range(5):
        k = int(rng.integers(2, 6))
        vd = rng.normal(0, 2, k)
        cd = rng.normal(0, 1, k)
        tau = float(rng.uniform(0.05, 0.8))
        u = np.sign(vd) * np.maximum(np.abs(vd) - tau, 0)
        eps = float(rng.uniform(0.2, 0.8) * np.abs(u - cd).sum())  # active
        ref_vec, _ = slsqp_l1(vd, tau, anchor=cd, eps=eps)
        q, _ = np.linalg.qr(rng.normal(size=(k, k)))
        p, _ = np.linalg.qr(rng.normal(size=(k, k)))
        v_mat = q @ np.diag(vd) @ p.T
        c_mat = q @ np.diag(cd) @ p.T
        reg = Regularizer("nuclear", shape=(k, k))
        ours = cprox(_t(v_mat).reshape(-1), tau, _t(c_mat).reshape(-1), eps, reg, iters=20000, tol=1e-11)
        expected = q @ np.diag(ref_vec) @ p.T
        assert np.max(np.abs(ours.numpy().reshape(k, k) - expected)) <= TOL
        assert float(reg_value(ours - _t(c_mat).reshape(-1), reg)) <= eps * (1 + 1e-6)


def test_inactive_constraint_returns_plain_prox_and_reference_mode_is_feasible():
    rng = np.random.default_rng(8)
    v, c = _t(rng.normal(0, 2, 12)), _t(rng.normal(0, 1, 12))
    reg = Regularizer("l1")
    u = prox(v, 0.3, reg)
    big = float(reg_value(u - c, reg)) * 2
    assert torch.equal(cprox(v, 0.3, c, big, reg), u)
    small = float(reg_value(u - c, reg)) * 0.5
    ref = cprox(v, 0.3, c, small, reg, mode="reference")
    exact = cprox(v, 0.3, c, small, reg)
    assert float(reg_value(ref - c, reg)) <= small * (1 + 1e-9)
    assert objective(exact, v, 0.3, reg) <= objective(ref, v, 0.3, reg) + 1e-12


def test_l1_ball_projection_matches_slsqp():
    rng = np.random.default_rng(9)
    for _ in range(10):
        x = rng.normal(0, 1, int(rng.integers(2, 25)))
        eps = float(rng.uniform(0.1, 1.0) * np.abs(x).sum())
        ours = l1_ball_project(_t(x), eps).numpy()
        # projection = constrained prox with tau = 0 around anchor 0 (tau > 0 tiny keeps SLSQP happy)
        ref, _ = slsqp_l1(x, 0.0, anchor=np.zeros_like(x), eps=eps)
        assert np.max(np.abs(ours - ref)) <= TOL


def test_operators_are_vmap_friendly():
    """Batched (vmap) results equal one-by-one results, for every operator a step may call."""
    rng = np.random.default_rng(10)
    v = _t(rng.normal(0, 2, (4, 20)))
    c = _t(rng.normal(0, 1, (4, 20)))
    reg_l1 = Regularizer("l1", coords=16)
    reg_nuc = Regularizer("nuclear", shape=(4, 4), radius=5.0)
    for reg in (reg_l1, reg_nuc):
        batched = vmap(lambda a: prox(a, 0.4, reg))(v)
        single = torch.stack([prox(a, 0.4, reg) for a in v])
        assert torch.allclose(batched, single, atol=1e-12)
    batched = vmap(lambda a, b: cprox(a, 0.2, b, 3.0, reg_l1))(v, c)
    single = torch.stack([cprox(a, 0.2, b, 3.0, reg_l1) for a, b in zip(v, c)])
    assert torch.allclose(batched, single, atol=1e-12)
    batched = vmap(lambda a, b: cprox(a, 0.2, b, 1.0, reg_nuc, iters=50))(v, c)
    single = torch.stack([cprox(a, 0.2, b, 1.0, reg_nuc, iters=50) for a, b in zip(v, c)])
    assert torch.allclose(batched, single, atol=1e-10)
    beta = vmap(lambda a, b: l1_multiplier(a, b, 0.2, 3.0))(v, c)
    assert beta.shape == (4,) and bool((beta >= 0).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_is_preserved(dtype):
    v = torch.randn(10, dtype=dtype)
    assert prox(v, 0.1, Regularizer("l1")).dtype == dtype
    assert cprox(v, 0.1, torch.zeros(10, dtype=dtype), 0.5, Regularizer("l1")).dtype == dtype
