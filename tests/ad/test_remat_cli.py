"""`presk dump --stage core-after-ad` of 04_grad.psk is the specification's listing (step 7),
with `--remat residuals` (the default) and `--remat recompute`, and `presk run` gives the same
bits in both forms (moved from presk-ad's tests: they drive presk-cli)."""

from __future__ import annotations

import json

from helpers import ROOT, presk_ok

GRAD = ROOT / "tutorial" / "04_grad.psk"

# The specification's listing (presk-tutorial-0.16.0, step 7), `…` written out.
LISTING_04 = """\
fn Linear.apply{In Out}(θ : params Linear{In, Out}, x : ℝ[..., In]) -> ℝ[..., Out] {
fn loss{D B}(θ : params Linear{D, 1}, x : ℝ[batch: B, D], y : ℝ[batch: B, 1]) -> ℝ[] {
fn loss_grad{D B}(θ : params Linear{D, 1}, x : ℝ[batch: B, D], y : ℝ[batch: B, 1]) -> params Linear{D, 1} {
fn Linear.init{In Out}(key : key) -> params Linear{In, Out} uses Rand {
fn loss_grad.lambda0{D B}(x : ℝ[batch: B, D], y : ℝ[batch: B, 1], θ : params Linear{D, 1}) -> ℝ[] {
fn loss_grad.lambda0.vjp{D B}(x : ℝ[batch: B, D], y : ℝ[batch: B, 1], θ : params Linear{D, 1}, ct : ℝ[]) -> (params Linear{D, 1}) {
fn loss.vjp{D B}(θ : params Linear{D, 1}, x : ℝ[batch: B, D], y : ℝ[batch: B, 1], ct : ℝ[]) -> (params Linear{D, 1}) {
fn Linear.apply.vjp{In Out}(θ : params Linear{In, Out}, x : ℝ[..., In], ct : ℝ[..., Out]) -> (params Linear{In, Out}) {
fn loss_grad.lambda0.grad{D B}(x : ℝ[batch: B, D], y : ℝ[batch: B, 1], θ : params Linear{D, 1}) -> params Linear{D, 1} {
fn Linear.apply.bwd{In Out}(θ : params Linear{In, Out}, x : ℝ[..., In], ct : ℝ[..., Out]) -> (params Linear{In, Out}) {
fn loss.bwd{D B}(θ : params Linear{D, 1}, x : ℝ[batch: B, D], residuals : (ℝ[batch: B, 1], ℝ[batch: B, 1]), ct : ℝ[]) -> (params Linear{D, 1}) {
fn loss.fwd{D B}(θ : params Linear{D, 1}, x : ℝ[batch: B, D], y : ℝ[batch: B, 1]) -> ((ℝ[batch: B, 1], ℝ[batch: B, 1])) {
fn loss_grad.lambda0.bwd{D B}(x : ℝ[batch: B, D], θ : params Linear{D, 1}, residuals : ((ℝ[batch: B, 1], ℝ[batch: B, 1])), ct : ℝ[]) -> (params Linear{D, 1}) {
fn loss_grad.lambda0.fwd{D B}(x : ℝ[batch: B, D], y : ℝ[batch: B, 1], θ : params Linear{D, 1}) -> (((ℝ[batch: B, 1], ℝ[batch: B, 1]))) {
"""  # noqa: E501


def presk(*args: str) -> str:
    return presk_ok(*args).stdout


def signatures(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if line.startswith("fn"))


# ---- the listing ---------------------------------------------------------------------------


def test_the_listing_of_04_grad_is_the_specifications() -> None:
    assert signatures(presk("dump", str(GRAD), "--stage", "core-after-ad")) == LISTING_04


def test_remat_residuals_is_the_default_and_recompute_keeps_the_vjps() -> None:
    default = presk("dump", str(GRAD), "--stage", "core-after-ad")
    assert presk("dump", str(GRAD), "--stage", "core-after-ad", "--remat", "residuals") == default
    recompute = presk("dump", str(GRAD), "--stage", "core-after-ad", "--remat", "recompute")
    assert signatures(recompute) == "".join(
        line + "\n"
        for line in LISTING_04.splitlines()
        if not line.split("{")[0].endswith(("bwd", "fwd"))
    )
    # today's loss.vjp: its forward pass again, then the sweep calling Linear.apply.vjp
    loss_vjp = recompute.split("fn loss.vjp")[1].split("\n}")[0]
    assert "call Linear.apply{" in loss_vjp and "call Linear.apply.vjp{" in loss_vjp


# ---- the same bits ---------------------------------------------------------------------------


def test_presk_run_04_grad_gives_the_same_bits_in_both_forms() -> None:
    args = ["run", str(GRAD), "--entry", "loss_grad", "--dim", "D=3", "--dim", "B=2"]
    outs = {remat: presk(*args, "--remat", remat) for remat in ("residuals", "recompute")}
    assert outs["residuals"] == outs["recompute"]
    exact = {
        remat: json.loads(presk(*args, "--json", "--remat", remat))["result"]
        for remat in ("residuals", "recompute")
    }
    assert exact["residuals"] == exact["recompute"]
    assert any(v != "0" for v in exact["residuals"]["w"][0])
