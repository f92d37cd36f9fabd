"""Each host function's own buffers (presk_kernel.frames): what a body touches is its frame's,
named as step 18's model.c names them, its locals placed past a mark in a stack of arenas."""

import re

import pytest
from kernel_entries import ENTRIES, lowered, program
from presk_kernel.calls import FUSED, calls_in, entry_call
from presk_kernel.frames import ALIGN, host_frames, let_names
from presk_kernel.fuse import fuse
from presk_kernel.ir import Call


def _fused(file, entry, dims, consts=(), train=False):
    schedule, _, _ = lowered(file, entry, dims, "f64", train, consts)
    return fuse(schedule)[0]


@pytest.mark.parametrize("file,entry,dims,consts", ENTRIES, ids=[e[1] for e in ENTRIES])
def test_a_body_touches_only_its_frame_s_buffers(file, entry, dims, consts):
    s = _fused(file, entry, dims, consts)
    frames = {f.function: f for f in host_frames(s, let_names(program(file, False, consts)[1]))}
    body = entry_call(s)
    assert list(frames) == [f.name for f in s.functions if f.calls or f.name == body.function]
    firsts = {}
    for c in (body, *calls_in(body)):
        firsts.setdefault(c.function, c)
    for name, call in firsts.items():
        frame = frames[name]
        touched = {a.buf for a in (*call.args, *call.results)}
        for item in call.body:
            args = (*item.args, *item.results) if isinstance(item, Call) else s.launches[item].args
            touched |= {a.buf for a in args}
        own = [*frame.params, *frame.results, *frame.locals]
        assert len(own) == len(touched)  # one frame buffer a buffer touched, no more
        assert {s.buffers[b].name for b in touched} == {b.site for b in own}
        names = [b.name for b in own]
        assert len(set(names)) == len(names) and all(re.fullmatch(r"\w+", n) for n in names)
        # the locals one after the other past the mark, each on 64 bytes; the calls' after
        ends = 0
        for b in frame.locals:
            assert b.offset == ends and b.offset % ALIGN == 0
            ends = b.offset + -(-b.bytes // ALIGN) * ALIGN
        callees = [frames[c.function].need for c in call.body if isinstance(c, Call)]
        assert frame.own == ends and frame.need == ends + max(callees, default=0)


def test_attention_s_frames_are_model_c_s():
    """L1151–L1169: presk_attend's q, k, v and result; a the let, t4 the mask; scores's
    result in the entry's frame, past the mark; scores a frame of its own."""
    file = "tutorial/03_attention.psk"
    s = _fused(file, "attend", (("B", 1), ("T", 3)))
    attend, scores = host_frames(s, let_names(program(file)[1]))
    assert [b.name for b in attend.params] == ["q", "k", "v"]
    assert [b.name for b in attend.results] == ["result"]
    assert {"a", "t4"} <= {b.name for b in attend.locals}
    assert scores.function.startswith("scores") and [b.name for b in scores.params] == [
        "in0",
        "in1",
    ]
    assert attend.need == attend.own + scores.need > attend.own


def test_the_final_norm_is_inlined_for_fusion_not_needlessly():
    """07_train's loss inlines Tower.apply and its final RMSNorm.apply, recorded as fused
    across the call (docs/ir.md): the norm's last kernel (x / sqrt(ms + eps) · γ) is fused
    into the loss's (· − y)² mean, one launch where keeping the call would take two. The
    three blocks' norms, fused with nothing outside, stay calls."""
    s = _fused("tutorial/07_train.psk", "loss", (("B", 4),))
    body = entry_call(s)
    assert {(i.function.split("[")[0], i.why) for i in body.inlined} == {
        ("Tower.apply", FUSED),
        ("RMSNorm.apply{D=4}", FUSED),
    }
    last = s.launches[body.body[-1]].kernel
    assert {st.split("/")[0] for st in last.steps} == {"RMSNorm.apply", "loss"}, last.steps
    blocks = [c for c in calls_in(body) if c.function.startswith("Block.apply")]
    assert len(blocks) == 3
    assert all(any(isinstance(x, Call) and "RMSNorm" in x.function for x in b.body) for b in blocks)
