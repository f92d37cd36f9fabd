"""The optimizer of a `training run` as PSK-Core functions, generated from its block.

`adamw.lr(t : ℝ[], T : ℝ[]) -> ℝ[]` is the block's schedule at step t of a horizon of T
steps; `adamw.step(θ, m, v, g : params M, t : ℝ[], lr : ℝ[]) -> (params M, params M,
params M)` is one AdamW step, PyTorch's (decoupled weight decay), leaf by leaf:
θ ← θ·(1 − lr·wd); m ← β₁m + (1 − β₁)g; v ← β₂v + (1 − β₂)g²;
θ ← θ − lr·(m/(1 − β₁ᵗ)) / (√(v/(1 − β₂ᵗ)) + ε). Being PSK-Core, they run on the
interpreter (and, later, on every backend) like any function of the program.
"""

from __future__ import annotations

from dataclasses import dataclass

from presk_syntax import ast as A
from presk_types.presburger import Lin
from presk_types.types import SCALAR, Bool, ParamsT, Real, TupleT, Type

from presk_core.build import FunctionBuilder
from presk_core.ir import Function, Lit, Operand, Value

R0 = Real(SCALAR)


@dataclass
class AdamW:
    """The hyperparameters of an `optimizer adamw` block, as written (exact decimals)."""

    lr: str = "0.001"
    weight_decay: str = "0.01"
    beta1: str = "0.9"
    beta2: str = "0.999"
    eps: str = "1e-8"
    warmup: int | None = None  # cosine(warmup = w); None: constant


def adamw_of(block: A.Optimizer) -> AdamW:
    """The block's hyperparameters (the checker has matched the block to its schema)."""
    opt = AdamW()
    for f in block.fields:
        if not isinstance(f, A.Field):
            continue
        value = f.value if f.value is not None else f.type
        match f.name, value:
            case (("lr" | "weight_decay" | "eps"), A.FloatLit(text)):
                setattr(opt, f.name, text)
            case (("lr" | "weight_decay" | "eps"), A.IntLit(n)):
                setattr(opt, f.name, str(n))
            case "betas", A.TupleExpr((b1, b2)):
                opt.beta1, opt.beta2 = (
                    getattr(b, "text", str(getattr(b, "value", ""))) for b in (b1, b2)
                )
            case "schedule", A.Call(A.Var("cosine"), (A.KeywordArg("warmup", A.IntLit(w)),)):
                opt.warmup = w
            case "schedule", A.Var("constant"):
                opt.warmup = None
    return opt


class _Body(FunctionBuilder):
    """`b("mul", [x, y])`: an instruction of a real scalar unless a type is given."""

    def __init__(self, name: str, params: list[Value]) -> None:
        super().__init__(name, FunctionBuilder.after(params))

    def __call__(self, operation: str, args: list[Operand], t: Type = R0, **attrs) -> Value:
        return self.emit(operation, args, t, attrs)


def lr_function(opt: AdamW) -> Function:
    t, horizon = Value(0, R0, "t"), Value(1, R0, "T")
    b = _Body("adamw.lr", [t, horizon])
    lr = Lit(opt.lr, R0)
    if opt.warmup is None:
        ret: Operand = b("mul", [lr, Lit("1", R0)])
    else:
        w = Lit(str(opt.warmup), R0)
        warm = b("mul", [lr, b("div", [t, w])])
        frac = b("div", [b("sub", [t, w]), b("sub", [horizon, w])])
        cosine = b("cos", [b("mul", [Lit("π", R0), frac])])
        decay = b("div", [b("mul", [lr, b("add", [Lit("1", R0), cosine])]), Lit("2", R0)])
        early = b("compare", [t, w], Bool(SCALAR), op="<=")
        ret = b("select", [early, warm, decay])
    return Function("adamw.lr", (), (t, horizon), R0, tuple(b.body), ret)


def step_function(
    opt: AdamW, tree: ParamsT, leaves: list[tuple[str, Type]], dims: tuple[str, ...]
) -> Function:
    names = ("θ", "m", "v", "g")
    params = [Value(i, tree, n) for i, n in enumerate(names)] + [
        Value(4, R0, "t"),
        Value(5, R0, "lr"),
    ]
    theta, m, v, g, t, lr = params
    b = _Body("adamw.step", params)
    b1, b2, eps, wd = (Lit(x, R0) for x in (opt.beta1, opt.beta2, opt.eps, opt.weight_decay))
    one = Lit("1", R0)
    c1 = b("sub", [one, b("pow", [b1, t])])
    c2 = b("sub", [one, b("pow", [b2, t])])
    shrink = b("sub", [one, b("mul", [lr, wd])])
    new_theta, new_m, new_v = [], [], []
    for path, leaf_type in leaves:
        p, mk, vk, gk = (b("field", [tree_v], leaf_type, path=path) for tree_v in (theta, m, v, g))
        p = b("mul", [p, shrink], leaf_type)
        mk = b(
            "add",
            [b("mul", [mk, b1], leaf_type), b("mul", [gk, b("sub", [one, b1])], leaf_type)],
            leaf_type,
        )
        g2 = b("mul", [gk, gk], leaf_type)
        vk = b(
            "add",
            [b("mul", [vk, b2], leaf_type), b("mul", [g2, b("sub", [one, b2])], leaf_type)],
            leaf_type,
        )
        m_hat = b("div", [mk, c1], leaf_type)
        v_hat = b("div", [vk, c2], leaf_type)
        step = b(
            "div", [m_hat, b("add", [b("sqrt", [v_hat], leaf_type), eps], leaf_type)], leaf_type
        )
        new_theta.append(b("sub", [p, b("mul", [step, lr], leaf_type)], leaf_type))
        new_m.append(mk)
        new_v.append(vk)
    keys = tuple(path for path, _ in leaves)
    trees = [b("record", vals, tree, keys=keys) for vals in (new_theta, new_m, new_v)]
    result = TupleT((tree, tree, tree))
    ret = b("tuple", trees, result)
    return Function("adamw.step", dims, tuple(params), result, tuple(b.body), ret)


__all__ = ["AdamW", "Lin", "adamw_of", "lr_function", "step_function"]


def optimizer_functions(elab) -> list[Function]:
    """`adamw.lr` and `adamw.step` for the main file's training run, if it has one: the step
    over the leaves of its model's parameter tree."""
    from presk_types.elab import instance_tree, lookup_module
    from presk_types.types import Instance

    main = elab.main
    for block in main.trainings:
        fields = {f.name: f for f in block.fields if isinstance(f, A.Field)}
        model, opt = fields.get("model"), fields.get("optimizer")
        if model is None or opt is None or not isinstance(opt.value, A.Var):
            continue
        parts, e = [], model.value
        while isinstance(e, A.FieldAccess):
            parts.insert(0, e.name)
            e = e.object
        if not isinstance(e, A.Var) or opt.value.name not in main.optimizers:
            continue
        info = lookup_module(A.QualName((e.name, *parts), e.span), main)
        if info is None or info.dims:
            continue
        tree = ParamsT(Instance(info.key, info.decl.name, ()))
        leaves = instance_tree(tree.instance, elab)
        dims = tuple(
            sorted(
                {
                    n
                    for _, t in leaves
                    for a in getattr(t, "shape", None).axes
                    for n in a.length.names
                }
            )
        )
        adamw = adamw_of(main.optimizers[opt.value.name])
        return [lr_function(adamw), step_function(adamw, tree, leaves, dims)]
    return []
