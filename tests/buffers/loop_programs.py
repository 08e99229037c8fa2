"""Loops the buffer and copy-insertion tests share: their loop state is
what scheduling, liveness and buffer assignment have to keep in place."""

# A counter and an array the body changes (negated before the loop, so the initial state dies there).
LOOP = """HloModule loop

body {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x = f32[4] get-tuple-element(p), index=1
  x2 = f32[4] add(x, x)
  x3 = f32[4] exponential(x2)
  ROOT t = (s32[], f32[4]) tuple(i1, x3)
}

cond {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  a = f32[4] parameter(0)
  z = s32[] constant(0)
  n = f32[4] negate(a)
  init = (s32[], f32[4]) tuple(z, n)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}
"""

# Two arrays swapped each iteration, one reversed: a body result read from another element of the state.
SWAP = """HloModule swap

body {
  p = (f32[4], f32[4], s32[]) parameter(0)
  a = f32[4] get-tuple-element(p), index=0
  b = f32[4] get-tuple-element(p), index=1
  i = s32[] get-tuple-element(p), index=2
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ra = f32[4] reverse(a), dimensions={0}
  ROOT t = (f32[4], f32[4], s32[]) tuple(b, ra, i1)
}

cond {
  p = (f32[4], f32[4], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=2
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  z = s32[] constant(0)
  init = (f32[4], f32[4], s32[]) tuple(x, y, z)
  ROOT w = (f32[4], f32[4], s32[]) while(init), condition=cond, body=body
}
"""
