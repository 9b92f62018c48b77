"""numpy helpers of the vector-unit examples: float32 step for step as the chip computes
(docs/vpu.md, "Float32 arithmetic"), written apart from tpusim's C++ so that the examples'
expected outputs are an independent check. The exponential's and the logarithm's constants
are read from the contract, their one home."""
import os
import tomllib

import numpy as np

N = 128  # lanes of a tpu-v3 row

_HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_HERE, '..', '..', 'contract', 'tpu_contract.toml'), 'rb') as f:
    _CONTRACT = tomllib.load(f)
_EXP, _LOG = _CONTRACT['fp32_exp'], _CONTRACT['fp32_log']
LOG2E, LN2_HI, LN2_LO = (np.float32(_EXP[k]) for k in ('log2e', 'ln2_hi', 'ln2_lo'))
TAYLOR = [np.float32(t) for t in _EXP['taylor']]
SQRT2_BITS = np.float32(_LOG['sqrt2']).view(np.uint32)
SERIES = [np.float32(t) for t in _LOG['series']]


def bf16_bits(x):
    """float32 values rounded to bfloat16 (nearest even), as uint16 bit patterns."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7fff + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def bf16(x):
    """float32 values rounded to bfloat16 (nearest even), as float32."""
    return from_bf16(bf16_bits(x))


def result_out(acc, ub, host, rows):
    """A program's last lines: accumulator rows through parameter set 0 (bias 0: the values
    rounded to bfloat16) into the buffer, out to the host, and halt."""
    return [f'activate acc={acc} ub={ub} rows={rows} params=0',
            f'write_host ub={ub} host={host:#x} rows={rows}', 'halt', '']


def f32_rows(x):
    """float32 rows (rows x N) as buffer rows: each row's high halves, then its low halves."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32)
    return np.stack([(u >> 16).astype(np.uint16), (u & 0xffff).astype(np.uint16)],
                    1).reshape(-1, N)


def blocks(x, pad):
    """The columns of x (rows x width) as blocks of N lanes, the last padded with `pad`."""
    rows, width = x.shape
    k = (width + N - 1) // N
    full = np.full((rows, k * N), pad, dtype=np.float32)
    full[:, :width] = x
    return [full[:, i * N:(i + 1) * N] for i in range(k)]


def lane_tree(rows, join):
    """Each row's lanes reduced by the vector unit's tree: pairs level by level, a last odd
    value passed up as it is."""
    v = np.asarray(rows, dtype=np.float32)
    while v.shape[1] > 1:
        half = v.shape[1] // 2
        nxt = join(v[:, 0:2 * half:2], v[:, 1:2 * half:2])
        if v.shape[1] % 2:
            nxt = np.concatenate([nxt, v[:, -1:]], axis=1)
        v = nxt
    return v[:, 0]


def fp32_exp(x):
    """e^x by the stated algorithm: n = rint(x log2 e), r = (x - n ln2_hi) - n ln2_lo, the
    degree-7 Taylor polynomial by Horner's rule, then 2^h and 2^(n - h), h = n / 2."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(all='ignore'):
        n = np.rint(x * LOG2E)
        r = (x - n * LN2_HI) - n * LN2_LO
        p = np.full_like(x, TAYLOR[0])
        for t in TAYLOR[1:]:
            p = p * r + t
        ni = np.nan_to_num(n, nan=0, posinf=0, neginf=0).astype(np.int64)
        h = np.trunc(ni / 2).astype(np.int64)
        y = np.ldexp(np.ldexp(p, h), ni - h).astype(np.float32)
    y[x > 89] = np.inf
    y[x < -104] = 0
    y[np.isnan(x)] = np.nan
    return y


def fp32_log(x):
    """ln x by the vector unit's algorithm (docs/vpu.md, "The logarithm"): x = 2^e m, m in
    [sqrt(2)/2, sqrt(2)); f = m - 1; s = f / (m + 1); R = z p(z), z = s^2; h = f f / 2;
    ln x = e ln2_hi - ((h - (s (h + R) + e ln2_lo)) - f)."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    e = ((bits >> 23) & 0xff).astype(np.int64) - 127
    m = (bits & 0x7fffff) | np.uint32(0x3f800000)
    big = m > SQRT2_BITS
    m = np.where(big, m - np.uint32(0x00800000), m).astype(np.uint32).view(np.float32)
    en = (e + big).astype(np.float32)
    with np.errstate(all='ignore'):
        f = m - np.float32(1)
        s = f / (m + np.float32(1))
        z = s * s
        p = np.full_like(x, SERIES[0])
        for c in SERIES[1:]:
            p = p * z + c
        r = z * p
        h = (f * f) * np.float32(0.5)
        t = s * (h + r) + en * LN2_LO
        y = en * LN2_HI - ((h - t) - f)
    y[(bits & 0x7f800000) == 0] = -np.inf  # zeros and subnormals
    y[x == np.inf] = np.inf
    y[(x < 0) | np.isnan(x)] = np.nan
    return y


def param_set(bias=None):
    """A VPU parameter set's bytes on a bf16 chip: float32 biases (`bias`, N lanes, or 0),
    float32 upper bounds (none: +infinity), the rest unused (docs/vpu.md)."""
    lanes = np.zeros((2, N), dtype='<f4')
    if bias is not None:
        lanes[0] = bias
    lanes[1] = np.inf
    return np.concatenate([lanes.view(np.uint8).ravel(), np.zeros(N, dtype=np.uint8)])


def pooling_host(maps, size, tile_at, params_at):
    """A pooling example's host memory of `size` bytes, and its tile: the maps (images x h x
    w x c) a pixel a row from 0x0, the tile of four identities times 1/4 (row q c + ch, lane
    ch: one identity a tap of the 2 x 2 window) at tile_at, parameter set 0 (bias 0) at
    params_at."""
    c = maps.shape[-1]
    host = np.zeros(size, dtype=np.uint8)
    rows = np.zeros((maps.size // c, N), dtype=np.float32)
    rows[:, :c] = maps.reshape(-1, c)
    host[:rows.shape[0] * 2 * N] = bf16_bits(rows).astype('<u2').view(np.uint8).ravel()
    tile = np.zeros((N, N), dtype=np.float32)
    for q in range(4):
        tile[q * c + np.arange(c), np.arange(c)] = 0.25
    host[tile_at:tile_at + 2 * N * N] = bf16_bits(tile).astype('<u2').view(np.uint8).ravel()
    host[params_at:params_at + 9 * N] = param_set()
    return host, tile


def single_program_example(stem, program, images, here, script):
    """The main of an example of one program: stem.asm (program()), stem.host.bin and
    stem.expected.bin (images(): the host memory and the expected output, as bytes)."""
    def write(out_dir):
        host, expected = images()
        write_files(out_dir, {f'{stem}.asm': program(), f'{stem}.host.bin': host,
                              f'{stem}.expected.bin': expected})
    write_or_check(write, here, script)


def write_files(out_dir, files):
    """Writes each file (name: text, or bytes) into out_dir and says which."""
    for name, content in files.items():
        binary = isinstance(content, bytes)
        with open(os.path.join(out_dir, name), 'wb' if binary else 'w') as f:
            f.write(content)
    print('wrote ' + ', '.join(files))


def write_or_check(write, here, script):
    """An example script's main: write(here), the committed files; with --check, write(tmp)
    elsewhere and exit with an error naming the committed files that differ (the tests'
    *_are_current). `write(out_dir)` writes every file of the example."""
    import argparse
    import filecmp
    import sys
    import tempfile
    ap = argparse.ArgumentParser(description=f'Writes the files of {script} (see its top).')
    ap.add_argument('--check', action='store_true',
                    help='write them elsewhere and fail where the committed files differ')
    if not ap.parse_args().check:
        write(here)
        return
    with tempfile.TemporaryDirectory() as tmp:
        write(tmp)
        stale = [f for f in sorted(os.listdir(tmp))
                 if not filecmp.cmp(os.path.join(tmp, f), os.path.join(here, f), shallow=False)]
    if stale:
        sys.exit(f'{script} --check: not what the script writes (run it): ' + ', '.join(stale))
