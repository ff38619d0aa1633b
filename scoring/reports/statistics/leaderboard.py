"""Which model do clinicians prefer? Correct shares, mean ranks, win rates and Bradley-Terry."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from .correlation import _review_pairs
from .intervals import INTERVAL_METHOD, cluster_ci
from .resampling import (
    DEFAULT_RESAMPLES,
    MIN_CLUSTERS,
    _cluster_counts,
    interval_note,
)
from .table import Array, JudgementTable, _as_float, _check_bootstrap_args


def wilson_interval(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    With ``p = successes / n`` and ``z`` the ``1 - (1 - confidence) / 2`` normal quantile::

        centre = (p + z^2 / (2n)) / (1 + z^2 / n)
        half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))
        (lo, hi) = (centre - half, centre + half)

    ``n == 0`` -> (nan, nan). Example: 8/10 at 95 % -> (0.490, 0.943).
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError("need 0 <= successes <= n")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be strictly between 0 and 1")
    if n == 0:
        return math.nan, math.nan
    z = float(sps.norm.ppf(1.0 - (1.0 - confidence) / 2.0))
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2.0 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _win_counts(table: JudgementTable) -> tuple[Array, Array, Array]:
    """Pairwise wins per cluster (the resampling unit).

    Returns ``(models, clusters, wins)`` with ``wins[c, i, j]`` = wins of model ``i`` over
    model ``j`` in reviews of cluster ``c`` (strictly better rank = 1, tie = 1/2 each).
    Pairs of responses from the same model are ignored.
    """
    models, model_idx = np.unique(np.asarray(table.model).astype(str), return_inverse=True)
    instructions, inst_idx = np.unique(np.asarray(table.clusters), return_inverse=True)
    model_idx, inst_idx = model_idx.ravel(), inst_idx.ravel()
    n_models, n_inst = models.shape[0], instructions.shape[0]
    rank = _as_float(table.rank)
    a, b, _, _, _ = _review_pairs(table, None)
    differ = model_idx[a] != model_idx[b]
    a, b = a[differ], b[differ]
    credit_ab = (rank[a] < rank[b]) + 0.5 * (rank[a] == rank[b])
    c = inst_idx[a]
    size = n_inst * n_models * n_models
    flat_ab = (c * n_models + model_idx[a]) * n_models + model_idx[b]
    flat_ba = (c * n_models + model_idx[b]) * n_models + model_idx[a]
    wins = np.bincount(flat_ab, weights=credit_ab, minlength=size)
    wins += np.bincount(flat_ba, weights=1.0 - credit_ab, minlength=size)
    return models, instructions, wins.reshape(n_inst, n_models, n_models)


BT_TOL = 1e-10


BT_BOOTSTRAP_TOL = 1e-8


BT_MAX_ITER = 100


@dataclass(frozen=True, eq=False)
class BradleyTerryFit:
    """A Bradley-Terry fit: log-strengths and whether each problem met the tolerance."""

    log_p: Array  # (..., m) log-strengths, mean zero per problem
    converged: Array  # (...) bool: the last step moved no log-strength by tol or more
    iterations: int  # Newton iterations run (the slowest problem's)
    max_change: float  # largest log-strength change in the last iteration, over problems
    tol: float

    @property
    def n_not_converged(self) -> int:
        return int(np.size(self.converged) - np.count_nonzero(self.converged))


def _strongly_connected(w: Array) -> Array:
    """Per problem: is the directed graph "i beat j at least fractionally" strongly connected?"""
    m = w.shape[-1]
    reach = (w > 0) | np.eye(m, dtype=bool)
    for _ in range(max(1, math.ceil(math.log2(m)))):
        reach = np.matmul(reach.astype(np.int64), reach.astype(np.int64)) > 0
    connected: Array = reach.all(axis=(-1, -2))
    return connected


def _bt_loglik(w: Array, theta: Array) -> Array:
    """Log-likelihood per problem; ``w`` has a zero diagonal."""
    d = theta[..., :, None] - theta[..., None, :]
    # log P(i beats j) = -log(1 + exp(-(theta_i - theta_j))), stable for any sign.
    loglik: Array = -(w * np.logaddexp(0.0, -d)).sum(axis=(-1, -2))
    return loglik


def bradley_terry_fit(
    wins: Array,
    prior: float = 0.1,
    tol: float = BT_TOL,
    max_iter: int = BT_MAX_ITER,
    start: Array | None = None,
) -> BradleyTerryFit:
    """Bradley-Terry log-strengths by Newton's method, to a stated tolerance.

    Model: ``P(i beats j) = p_i / (p_i + p_j)`` with ``theta = log p``. ``wins[..., i, j]`` =
    (fractional) wins of ``i`` over ``j``; leading axes are independent problems (e.g. bootstrap
    resamples). ``prior`` pseudo-wins are added to every off-diagonal cell, i.e. ``prior`` wins
    of ``i`` over ``j`` *and* ``prior`` wins of ``j`` over ``i`` (``2 * prior`` virtual games
    per pair, split evenly); this keeps strengths finite when a model never wins and connects
    the comparison graph. The fit maximizes the log-likelihood::

        L(theta) = sum_{i != j} w_ij log sigma(theta_i - theta_j)

    with ``sigma`` the logistic function. Gradient ``g_i = W_i - sum_j N_ij sigma_ij``
    (``W_i = sum_j w_ij``, ``N_ij = w_ij + w_ji``) and negative Hessian the graph Laplacian
    with edge weights ``N_ij sigma_ij sigma_ji``; each Newton step solves
    ``(Laplacian + 11^T / m) delta = g`` (which keeps ``sum theta = 0``), halving the step
    until the likelihood does not decrease. The fit stops when no log-strength changes by
    ``tol`` or more in an iteration (Newton converges quadratically, so the distance to the
    optimum is then far below ``tol``); problems still moving after ``max_iter`` iterations
    are reported in ``converged`` (for example when ``prior = 0`` and a model never wins,
    where no finite maximum exists). Hunter's (2004) MM algorithm, used before, needs tens of
    thousands of iterations on weakly connected comparison graphs. ``start`` (log-strengths)
    warm-starts every problem, e.g. bootstrap refits from the point estimate; the optimum is
    unique (the likelihood is strictly concave on ``sum theta = 0``), so only speed changes.
    """
    w = np.asarray(wins, dtype=float)
    if prior < 0:
        raise ValueError("prior must be >= 0")
    if tol <= 0 or max_iter < 1:
        raise ValueError("tol must be > 0 and max_iter >= 1")
    m = w.shape[-1]
    batch = w.shape[:-2]
    if m < 2:
        return BradleyTerryFit(
            np.zeros(w.shape[:-1]), np.ones(batch, dtype=bool), 0, 0.0, float(tol)
        )
    off = 1.0 - np.eye(m)
    w = (w * off + prior * off).reshape(-1, m, m)  # zero diagonal from here on
    n = w + np.swapaxes(w, -1, -2)
    total = w.sum(axis=-1)
    theta = np.zeros((w.shape[0], m))
    if start is not None:
        theta += np.asarray(start, dtype=float) - np.mean(start)
    ll = _bt_loglik(w, theta)
    active = np.ones(w.shape[0], dtype=bool)
    last_change = np.zeros(w.shape[0])
    centring = np.full((m, m), 1.0 / m)
    eye = np.eye(m)
    iterations = 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 - read after the loop
        idx = np.flatnonzero(active)
        if idx.size == 0:
            iterations -= 1
            break
        t, wa, na = theta[idx], w[idx], n[idx]
        s = 0.5 * (1.0 + np.tanh(0.5 * (t[:, :, None] - t[:, None, :])))  # sigma, stable
        g = total[idx] - (na * s).sum(axis=-1)
        h = na * s * (1.0 - s)
        # A tiny ridge keeps the system solvable when a strength runs off to infinity (its
        # edge weights underflow to 0); it does not move the optimum, only the step length.
        diag = h.sum(axis=-1)
        ridge = 1e-12 * (1.0 + diag.sum(axis=-1) / m)
        system = eye * (diag + ridge[:, None])[:, :, None] - h + centring
        delta = np.linalg.solve(system, g[..., None])[..., 0]
        base = ll[idx]
        step = np.ones(idx.size)
        cand_ll = _bt_loglik(wa, t + delta)
        for _ in range(40):
            worse = cand_ll < base - 1e-12 * np.abs(base)
            if not worse.any():
                break
            step = np.where(worse, step / 2.0, step)
            cand_ll = np.where(worse, _bt_loglik(wa, t + step[:, None] * delta), cand_ll)
        moved = step[:, None] * delta
        new = t + moved
        theta[idx] = new - new.mean(axis=-1, keepdims=True)
        ll[idx] = cand_ll
        change = np.max(np.abs(moved), axis=-1)
        last_change[idx] = change
        active[idx] = ~(change < tol)
    converged = ~active
    if prior == 0:
        # Without pseudo-wins a finite maximum exists only when every model can be reached from
        # every other by a chain of wins (Ford 1957); otherwise the steps can shrink below tol
        # in floating point while the strengths still drift to infinity.
        converged &= _strongly_connected(w)
    return BradleyTerryFit(
        log_p=theta.reshape(*batch, m),
        converged=converged.reshape(batch),
        iterations=int(iterations),
        max_change=float(last_change.max()) if last_change.size else 0.0,
        tol=float(tol),
    )


def bradley_terry(
    wins: Array, prior: float = 0.1, tol: float = BT_TOL, max_iter: int = BT_MAX_ITER
) -> Array:
    """Bradley-Terry log-strengths (mean zero per problem); see :func:`bradley_terry_fit`."""
    return bradley_terry_fit(wins, prior=prior, tol=tol, max_iter=max_iter).log_p


def win_rate_matrix(table: JudgementTable) -> tuple[list[str], Array]:
    """Head-to-head win rates between models within the same review.

    ``matrix[i, j] = w_ij / (w_ij + w_ji)``, where ``w_ij`` counts the response pairs in the
    same review with model ``i`` ranked strictly better than model ``j`` (ties count 1/2 for
    each side). nan on the diagonal and where two models never met, so
    ``matrix[i, j] + matrix[j, i] == 1`` wherever defined. Models are sorted by name.
    """
    models, _, wins = _win_counts(table)
    w = wins.sum(axis=0)
    n = w + w.T
    with np.errstate(invalid="ignore", divide="ignore"):
        matrix = np.where(n > 0, w / np.where(n > 0, n, 1.0), np.nan)
    np.fill_diagonal(matrix, np.nan)
    return [str(m) for m in models], matrix


def leaderboard(
    table: JudgementTable,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    prior: float = 0.1,
    min_clusters: int = MIN_CLUSTERS,
) -> list[dict[str, Any]]:
    """Per-model summary rows; see :func:`leaderboard_fit` (which also says how BT converged)."""
    return leaderboard_fit(table, n_resamples, seed, confidence, prior, min_clusters)[0]


def leaderboard_fit(
    table: JudgementTable,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    prior: float = 0.1,
    min_clusters: int = MIN_CLUSTERS,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per-model summary, sorted by Bradley-Terry strength (best first).

    For each model: ``n`` rows; ``share_correct = sum(correct) / n_correct_known`` (rows where
    ``correct`` is nan are ignored) and ``mean_rank``, each with a studentized cluster-bootstrap
    interval (``intervals``: several clinicians' judgements of one instruction, or one
    patient's instructions, are not independent: a binomial interval over judgements would be
    too narrow); and the Bradley-Terry log-strength (:func:`bradley_terry` on the pairwise wins of
    :func:`win_rate_matrix`), normalized to mean zero over models, with a percentile CI from a
    cluster bootstrap (not studentized: a refit has no standard error of its own; the
    per-cluster win matrices are resampled and the model refitted for every resample,
    vectorized over resamples). No interval below ``min_clusters`` clusters.

    The second value reports the fits: the tolerance, whether the point fit converged, its
    iterations, and how many bootstrap refits did not converge (their strengths still enter
    the interval, as the best estimate reached; the report shows the count).
    """
    _check_bootstrap_args(n_resamples, confidence)
    models, _, wins = _win_counts(table)
    n_models = models.shape[0]
    info: dict[str, Any] = {
        "prior": prior,
        "pseudo_wins": "prior wins in each direction of every pair of models",
        "tol": BT_TOL,
        "bootstrap_tol": BT_BOOTSTRAP_TOL,
        "max_iter": BT_MAX_ITER,
        "converged": True,
        "iterations": 0,
        "bootstrap_not_converged": 0,
        "bootstrap_fits": 0,
        "interval_method": "percentile cluster bootstrap",
        "shares_interval_method": INTERVAL_METHOD,
    }
    if n_models == 0:
        return [], info
    point = bradley_terry_fit(wins.sum(axis=0), prior=prior)
    strength = point.log_p
    info.update(converged=bool(np.all(point.converged)), iterations=point.iterations)
    if wins.shape[0] >= min_clusters:
        draws = _cluster_counts(wins.shape[0], int(n_resamples), int(seed))
        boot_wins = (draws @ wins.reshape(wins.shape[0], -1)).reshape(-1, n_models, n_models)
        boot_fit = bradley_terry_fit(
            boot_wins,
            prior=prior,
            tol=BT_BOOTSTRAP_TOL,
            start=strength if point.converged else None,
        )
        boot = boot_fit.log_p
        info.update(
            bootstrap_not_converged=boot_fit.n_not_converged, bootstrap_fits=int(boot.shape[0])
        )
        alpha = 1.0 - confidence
        bt_lo, bt_hi = np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)
    else:
        bt_lo = bt_hi = np.full(n_models, np.nan)
    comparisons = (wins.sum(axis=0) + wins.sum(axis=0).T).sum(axis=1)

    model_str = np.asarray(table.model).astype(str)
    correct = _as_float(table.correct)
    rank = _as_float(table.rank)
    # A mean rank lies between 1 and the most responses a review ranked.
    per_review = np.unique(np.asarray(table.review), return_counts=True)[1]
    max_rank = float(max(1, int(per_review.max()))) if per_review.size else 1.0
    clusters = np.asarray(table.clusters)
    resampling: dict[str, Any] = {
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "min_clusters": min_clusters,
    }
    info["n_clusters"] = int(wins.shape[0])
    info["interval_note"] = interval_note(int(wins.shape[0]), min_clusters)
    rows: list[dict[str, Any]] = []
    for k, name in enumerate(models):
        mine = model_str == name
        known = mine & ~np.isnan(correct)
        n_known = int(known.sum())
        succ = float(correct[known].sum())
        lo, hi = cluster_ci(correct[known], clusters[known], **resampling, bounds=(0.0, 1.0))
        has_rank = mine & ~np.isnan(rank)
        ranks = rank[has_rank]
        rank_lo, rank_hi = cluster_ci(
            ranks, clusters[has_rank], **resampling, bounds=(1.0, max_rank)
        )
        rows.append(
            {
                "model": str(name),
                "n": int(mine.sum()),
                "n_correct_known": n_known,
                "share_correct": succ / n_known if n_known else math.nan,
                "correct_ci_low": lo,
                "correct_ci_high": hi,
                "mean_rank": float(ranks.mean()) if ranks.size else math.nan,
                "rank_ci_low": rank_lo,
                "rank_ci_high": rank_hi,
                "bt_strength": float(strength[k]),
                "bt_ci_low": float(bt_lo[k]),
                "bt_ci_high": float(bt_hi[k]),
                "n_comparisons": float(comparisons[k]),
            }
        )
    rows.sort(key=lambda r: (-float(r["bt_strength"]), str(r["model"])))
    return rows, info


# --- Bradley-Terry with style control -----------------------------------------------------------

STYLE_RIDGE = 1e-4


def _logistic_fit(
    x: Array, y: Array, w: Array, ridge: float, max_iter: int = 50, tol: float = 1e-10
) -> tuple[Array, Array, bool]:
    """Weighted logistic regression without intercept by Newton's method; returns the
    coefficients, the Hessian of the penalised negative log-likelihood and convergence."""
    beta = np.zeros(x.shape[1])
    hess = np.eye(x.shape[1]) * ridge
    for _ in range(max_iter):
        p = 0.5 * (1.0 + np.tanh(0.5 * (x @ beta)))
        grad = x.T @ (w * (y - p)) - ridge * beta
        hess = (x * (w * p * (1.0 - p))[:, None]).T @ x + ridge * np.eye(x.shape[1])
        step = np.linalg.solve(hess, grad)
        beta = beta + step
        if float(np.max(np.abs(step))) < tol:
            return beta, hess, True
    return beta, hess, False


def _style_ratio(a: Array, b: Array) -> Array:
    """FastChat's normalised difference ``(a - b) / (a + b)`` (0 where both are 0)."""
    total = a + b
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total != 0, (a - b) / np.where(total != 0, total, 1.0), 0.0)


def style_controlled_bradley_terry(
    table: JudgementTable,
    style: Mapping[str, Array],
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, Any]:
    """Model strengths with and without style covariates (Chatbot Arena's style control, as
    FastChat fits it), so that "longer" and "clinically better" can be told apart.

    Every pair of responses of two different models in one review is a game: ``y = 1`` when the
    first is ranked better, a tie counts as half a win each (the game twice at weight 1/2). The
    plain fit is the logistic Bradley-Terry model ``logit P = theta_a - theta_b``; the
    style-controlled fit adds, per style feature ``f`` (``style[f]``: one value per row, e.g.
    the response's length in words, its list items), ``gamma_f * z_f`` with ``z_f`` the
    normalised difference ``(f_a - f_b) / (f_a + f_b)`` scaled to unit root-mean-square over
    games (not centred: it must stay antisymmetric in the two sides). Strengths are
    centred (mean zero over models); intervals are normal with cluster-robust (sandwich)
    standard errors summed over clusters, none below ``min_clusters`` clusters. A style
    coefficient above zero means clinicians preferred more of that feature, whatever the model.
    """
    from .correlation import _review_pairs

    models, model_idx = np.unique(np.asarray(table.model).astype(str), return_inverse=True)
    model_idx = model_idx.reshape(-1)
    rank = _as_float(table.rank)
    a, b, _, _, _ = _review_pairs(table, None)
    keep = model_idx[a] != model_idx[b]
    a, b = a[keep], b[keep]
    m = models.shape[0]
    names = list(style)
    out: dict[str, Any] = {
        "models": [str(v) for v in models],
        "features": names,
        "n_games": int(a.shape[0]),
        "plain": {},
        "controlled": {},
        "style_coefficients": {},
        "method": "logistic Bradley-Terry, ties as half wins; cluster-robust normal intervals",
        "confidence": confidence,
    }
    if m < 2 or a.shape[0] == 0:
        return out
    win = (rank[a] < rank[b]).astype(float) + 0.5 * (rank[a] == rank[b])
    # Each game twice: y = 1 with weight "win", y = 0 with weight 1 - "win".
    design = np.zeros((a.shape[0], m))
    design[np.arange(a.shape[0]), model_idx[a]] = 1.0
    design[np.arange(a.shape[0]), model_idx[b]] -= 1.0
    feats = []
    constant: set[str] = set()  # a feature that never differs between two sides says nothing
    for f in names:
        values = _as_float(style[f])
        z = _style_ratio(values[a], values[b])
        # Scaled, never centred: a game's feature must change sign when its two sides swap,
        # and which side comes first here is the order of the rows, not a choice of anyone's.
        rms = float(np.sqrt(np.mean(z * z)))
        feats.append(z / rms if rms > 0 else np.zeros_like(z))
        if rms == 0:
            constant.add(f)
    clusters = np.asarray(table.clusters)[a]
    cluster_ids, cluster_idx = np.unique(clusters, return_inverse=True)
    n_clusters = int(cluster_ids.shape[0])
    z_crit = float(sps.norm.ppf(1.0 - (1.0 - confidence) / 2.0))
    centring = np.eye(m) - 1.0 / m
    for label, extra in (("plain", []), ("controlled", feats)):
        x1 = np.column_stack([design, *extra]) if extra else design
        x = np.vstack([x1, x1])
        y = np.r_[np.ones(a.shape[0]), np.zeros(a.shape[0])]
        w = np.r_[win, 1.0 - win]
        beta, hess, converged = _logistic_fit(x, y, w, STYLE_RIDGE)
        p = 0.5 * (1.0 + np.tanh(0.5 * (x @ beta)))
        scores = x * (w * (y - p))[:, None]
        meat_parts = np.zeros((n_clusters, x.shape[1]))
        np.add.at(meat_parts, np.r_[cluster_idx, cluster_idx].reshape(-1), scores)
        bread = np.linalg.inv(hess)
        cov = bread @ (meat_parts.T @ meat_parts) @ bread
        strengths = centring @ beta[:m]
        se = np.sqrt(np.clip(np.diag(centring @ cov[:m, :m] @ centring.T), 0.0, None))
        show = n_clusters >= min_clusters
        out[label] = {
            "converged": converged,
            "strength": {str(k): float(v) for k, v in zip(models, strengths, strict=True)},
            "ci_low": {
                str(k): float(v - z_crit * e) if show else math.nan
                for k, v, e in zip(models, strengths, se, strict=True)
            },
            "ci_high": {
                str(k): float(v + z_crit * e) if show else math.nan
                for k, v, e in zip(models, strengths, se, strict=True)
            },
        }
        if extra:
            se_style = np.sqrt(np.clip(np.diag(cov)[m:], 0.0, None))
            out["style_coefficients"] = {
                f: {
                    "coefficient": math.nan if f in constant else float(beta[m + i]),
                    "ci_low": float(beta[m + i] - z_crit * se_style[i])
                    if show and f not in constant
                    else math.nan,
                    "ci_high": float(beta[m + i] + z_crit * se_style[i])
                    if show and f not in constant
                    else math.nan,
                }
                for i, f in enumerate(names)
            }
    out["n_clusters"] = n_clusters
    out["interval_note"] = interval_note(n_clusters, min_clusters)
    return out
