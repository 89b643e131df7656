"""Bad inputs of every class an independent fuzzer found to end in an
internal error, a hang, an error without a location or PTX that ptxas
rejects (issue 18, item 4), each with where its error must point.

One home for them: tests/test_bad_inputs.py checks each ends in a located
error, and tools/fuzz.py mutates them as seeds next to the examples.  A
program is `str`, or `bytes` when the class is about the file's encoding.
"""
from __future__ import annotations

import attrs

_HEAD = "target sm_90a\nkernel k(A: f32[16], n: i32):\n    tx = thread_id([32])\n"
_BAR = _HEAD + "    bar = alloc_shared([1], u64)\n"


@attrs.frozen
class BadInput:
    name: str
    program: object  # str, or bytes
    line: int  # the line the error must point at
    says: str  # a fragment of the message
    target: str = "sm_90a"


def _nested_ifs(n: int) -> str:
    return _HEAD + "".join("    " * (i + 1) + "if tx == 0:\n" for i in range(n)) + "    " * (n + 1) + "A[0] = 1.0\n"


SEEDS = [
    BadInput("500 parentheses", _HEAD + "    A[0] = " + "(" * 500 + "1.0" + ")" * 500 + "\n", 4, "nested too deeply"),
    BadInput("400-term sum", _HEAD + "    x: i32 = " + " + ".join(["n"] * 400) + "\n", 4, "nested too deeply"),
    BadInput("300 nested ifs", _nested_ifs(300), 52, "nested too deeply"),
    BadInput("300 nested lists", _HEAD + "    x = " + "[" * 300 + "1" + "]" * 300 + "\n", 4, "nested too deeply"),
    BadInput("400 chained metas", _HEAD + "    meta m0 = n\n"
             + "".join(f"    meta m{i + 1} = m{i} * 3 + tx\n" for i in range(400))
             + "    A[0] = convert(m400, f32)\n", 2, "nests too deeply"),
    BadInput("40 chained metas: printable only 100 levels deep (fuzz seed 18, input 3521)",
             _HEAD + "    meta m0 = n\n" + "".join(f"    meta m{i + 1} = m{i} * 3 + tx\n" for i in range(40))
             + "    A[0] = convert(m40, f32)\n", 45, "once metas and helpers are substituted"),
    BadInput("assigning a run-time extent (fuzz seed 18, input 1978)",
             "kernel k(A: f16[count]):\n    tid = thread_id([32])\n    if tid == 0:\n        count = 1\n",
             4, "cannot assign to run-time extent 'count'"),
    BadInput("invalid UTF-8", (_HEAD + "    # caf\xe9\n    A[0] = 1.0\n").encode("latin-1"), 4, "not valid UTF-8"),
    BadInput("form feed in a comment", _HEAD + "    # a\x0cb\n    x = undefined_name\n", 5, "not defined"),
    BadInput("U+2028 in a comment", _HEAD + "    # a\u2028b\n    x = undefined_name\n", 5, "not defined"),
    BadInput("ptr_to without an index", _BAR + "    ptx.mbarrier.init(bar.ptr_to(), 1)\n", 5, "missing argument 'index'"),
    BadInput("mbarrier phase 2", _BAR + "    ptx.mbarrier.try_wait(bar.ptr_to([0]), 2)\n", 5, "'phase' must be in [0, 1]"),
    BadInput("mbarrier phase 2 after unrolling",
             _BAR + "    for p in unroll(3):\n        ptx.mbarrier.try_wait(bar.ptr_to([0]), convert(p, u32))\n",
             6, "'phase' must be in [0, 1]"),
    BadInput("mbarrier count 0", _BAR + "    ptx.mbarrier.init(bar.ptr_to([0]), 0)\n", 5, "'count' must be in [1, 1048575]"),
    BadInput("expect_tx past 2**20", _BAR + "    ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 1048576)\n",
             5, "'bytes' must be in [0, 1048575]"),
    BadInput("an immediate wider than its operand", _HEAD + "    x: i32 = n\n    x <<= 4294967296\n    A[0] = 1.0\n",
             5, "does not fit in a 32-bit operand"),
    BadInput("static shared memory past 227 KiB", _HEAD + '    s = alloc((300000,), u8, scope="shared")\n',
             4, "over the 232448 bytes (227 KiB) of static shared memory a block may have on sm_90a"),
    BadInput("static shared memory past 48 KiB on sm_80",
             _HEAD.replace("sm_90a", "sm_80") + '    s = alloc((49153,), u8, scope="shared")\n',
             4, "over the 49152 bytes (48 KiB) of static shared memory a block may have on sm_80; "
             'allocate large buffers with scope="shared.dyn"', target="sm_80"),
    BadInput("shared memory of 2**64 u64", _HEAD + "    s = alloc_shared([0xffffffffffffffff], u64)\n",
             4, "over the 232448 bytes (227 KiB)"),
    BadInput("static plus dynamic shared memory past 227 KiB",
             _HEAD + '    s = alloc((200000,), u8, scope="shared")\n    d = alloc((40000,), u8, scope="shared.dyn")\n',
             5, "(200000 static, 40000 dynamic)"),
    BadInput("dynamic shared memory past 227 KiB", _HEAD + '    s = alloc((232449,), u8, scope="shared.dyn")\n',
             4, "over the 232448 bytes (227 KiB) a block may use on sm_90a"),
    BadInput("dynamic shared memory past 163 KiB on sm_80",
             _HEAD.replace("sm_90a", "sm_80") + '    s = alloc((166913,), u8, scope="shared.dyn")\n',
             4, "over the 166912 bytes (163 KiB) a block may use on sm_80", target="sm_80"),
    BadInput("pool past the limit", _HEAD + "    pool = smem_pool()\n    a = pool.alloc((200000,), u8)\n"
             "    b = pool.alloc((40000,), u8)\n    pool.commit()\n", 6, "dynamic"),
    BadInput("unroll(2**63 - 1)", _HEAD + "    for s in unroll(0x7fffffffffffffff):\n        A[0] = 1.0\n",
             4, "more than the 1024 tilec unrolls"),
    BadInput("unroll(2**63), past len() of a range (fuzz seed 18, input 390)",
             _HEAD + "    for s in unroll(9223372036854775808):\n        A[0] = 1.0\n", 4, "more than the 1024 tilec unrolls"),
    BadInput("unroll(2**64 - 1, 0, -1)", _HEAD + "    for s in unroll(18446744073709551615, 0, -1):\n        A[0] = 1.0\n",
             4, "more than the 1024 tilec unrolls"),
    BadInput("nested unrolls too large", _HEAD + "    for s in unroll(1000):\n        for t in unroll(1000):\n"
             "            A[0] = 1.0\n", 5, "more than 8192 statements"),
    BadInput("fill of a huge tile", _HEAD.replace("f32[16]", "f32[1048576]") + "    fill(A, 0.0)\n",
             4, "tilec unrolls"),
    BadInput("file ending after 'if True:'", _HEAD + "    if True:", 4, "expected an indented block"),
]
