"""Call boundaries kept in the schedule (issue 21 §3): host functions, calls, inlining."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kernel_entries import ENTRIES, case
from presk_core.specialize import specialize
from presk_kernel.calls import call_launches, calls_in, flat_launches
from presk_kernel.codec import decode_kernel, encode_kernel
from presk_kernel.fuse import fuse
from presk_kernel.ir import Call, format_schedule
from presk_kernel.layout import lay_out
from presk_kernel.lower import lower_entry
from presk_kernel.spec import host_problems, schedule_problems
from presk_syntax.codec import DocumentError

IDS = [e[1] for e in ENTRIES]


def _schedules(file, entry, dims, consts):
    core, name, d, args, _ = case(file, entry, dims, False, consts)
    lowered = lower_entry(core, name, d, args)
    return core, name, d, lowered, lay_out(fuse(lowered)[0])


@pytest.mark.parametrize("file,entry,dims,consts", ENTRIES, ids=IDS)
def test_the_host_functions_are_the_functions_the_entry_reaches(file, entry, dims, consts):
    core, name, d, lowered, laid = _schedules(file, entry, dims, consts)
    reached = [f.name for f in specialize(core, name, d).functions]
    for s in (lowered, laid):
        assert [f.name for f in s.functions] == reached
        assert s.body.function == reached[0] and s.functions[0].calls == 1
        for f in s.functions[1:]:  # each function's count of calls is its calls' in the tree
            assert f.calls == sum(c.function == f.name for c in calls_in(s.body))
        assert schedule_problems(s) == []


@pytest.mark.parametrize("file,entry,dims,consts", ENTRIES, ids=IDS)
def test_the_flattened_calls_are_the_launches(file, entry, dims, consts):
    _, _, _, lowered, laid = _schedules(file, entry, dims, consts)
    for s in (lowered, laid):
        assert flat_launches(s) == s.launches
        assert list(call_launches(s.body)) == list(range(len(s.launches)))
        written = {}
        for c in calls_in(s.body):  # a kept call writes its results in its own body
            out = {
                a.buf
                for i in call_launches(c)
                for a in s.launches[i].args[len(s.launches[i].kernel.inputs) :]
            }
            written[c.function] = all(r.buf in out for r in c.results)
        assert all(written.values()), written
    assert len(laid.launches) == len(fuse(replace(lowered, functions=(), body=None))[0].launches)


def test_the_launch_counts_are_fusions_and_calls_are_kept():
    _, _, _, lowered, laid = _schedules("tutorial/07_train.psk", "loss", (("B", 8),), ())
    assert (len(laid.launches), len(lowered.launches)) == (17, 39)  # docs/native.md's
    kept = {c.function for c in calls_in(laid.body)}
    assert "Block.apply[batch: 8]" in kept and laid.functions[2].calls == 3
    inlined = {i.function: i.why for c in (laid.body, *calls_in(laid.body)) for i in c.inlined}
    assert inlined["Linear.apply{In=4,Out=4}[batch: 8]"].startswith("fused with a launch")


def test_attention_keeps_scores_as_the_spec_prints_it():
    _, _, _, _, laid = _schedules("tutorial/03_attention.psk", "attend", (("B", 1), ("T", 3)), ())
    assert [f.name for f in laid.functions] == ["attend{B=1,T=3}", "scores{B=1,T=3}"]
    assert isinstance(laid.body.body[0], Call) and laid.body.body[0].function.startswith("scores")
    text = format_schedule(laid)
    assert text.startswith("entry attend at B = 1, T = 3: 5 launches\nkernel ein[")
    assert "host scores{B=1,T=3} (" in text and "  call scores{B=1,T=3} (q, k) -> (" in text


def test_the_document_round_trips_the_host_functions():
    for file, entry, dims, consts in ENTRIES[2:6]:
        laid = _schedules(file, entry, dims, consts)[4]
        assert decode_kernel(encode_kernel(laid)) == laid


def _broken(s, body):
    return replace(s, body=body)


def test_the_verifier_refuses_a_broken_call():
    _, _, _, _, s = _schedules("tutorial/03_attention.psk", "attend", (("B", 1), ("T", 3)), ())
    call = s.body.body[0]
    assert isinstance(call, Call)

    def with_call(c):
        return replace(s, body=replace(s.body, body=(c, *s.body.body[1:])))

    unknown = with_call(replace(call, function="nowhere"))
    assert host_problems(unknown) == ["a call of `nowhere`, not a host function"]
    arity = with_call(replace(call, args=call.args[:1]))
    assert "with 1 arguments, not 2" in host_problems(arity)[0]
    mask = next(b for b in s.buffers if b.dtype != "f64")  # attend/%4, the causal mask
    typed = with_call(replace(call, results=(replace(call.results[0], buf=mask.id),)))
    want = f"passes `{mask.name}` : {mask.dtype}[9] from element 0 as its result %2"
    assert want in host_problems(typed)[0]
    outside = replace(s, body=replace(s.body, body=s.body.body[:-1]))
    assert host_problems(outside) == ["launch 4 is outside every host function"]
    twice = replace(s, body=replace(s.body, body=(*s.body.body, 4)))
    assert "out of order, or one twice" in host_problems(twice)[0]
    for bad in (unknown, arity, outside):
        with pytest.raises(DocumentError, match="not well formed"):
            decode_kernel(encode_kernel(bad))


def test_a_document_of_version_2_is_refused():
    from presk_syntax.codec import FileTable, dump_document

    data = dump_document("kernel", 2, {"schedule": None}, FileTable())
    with pytest.raises(DocumentError, match="of version 2; this presk reads version 10"):
        decode_kernel(data)
