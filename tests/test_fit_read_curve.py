"""Step 1 of the device fit by hand: the depth-1 read curve (``swaptrace.ssd.fit.reads``).

The curves here are made in the test from the latency the module docstring and docs/ssd.md state: a random
read of ``n`` 4 KiB map units costs ``tR + k u_c + u_h`` (``k`` = units the busiest channel transfers,
``u_c`` = one unit over a channel, ``u_h`` = one unit over the host link), or ``n u_h`` when the host link
bounds it. ``k`` is counted here with plain loops over the stripe (map unit ``x`` at stripe position
``phase + x``, program unit ``pos // pu`` on channel ``(pos // pu) % channels``), never by the product.
An exact curve must come back exactly (relative 1e-9: a few float roundings of a least-squares line).
"""

from __future__ import annotations

import math

import pytest

from swaptrace.ssd.fit import reads as R

UNIT = 4096  # bytes per map unit
SWEEP = (4096, 8192, 16384, 32768, 65536, 131072, 262144, 1048576)  # sweep_read_4k .. sweep_read_1m
#: the sizes a 4-channel, 16 KiB-unit device fits: a read of n units may span ceil((n + pu - 1) / pu) program
#: units, and over more than ``channels`` it may meet a die twice (another tR, which the bare formula leaves
#: out), so the fit takes those sizes only as lower bounds. Fed the bare formula over the whole sweep, the fit
#: settles on more channels, which such a bound cannot refuse: the cases here stop at the last fitted size.
STRIPE4 = SWEEP[:4]


def naive_busiest(n: int, pu: int, channels: int, phase: int) -> float:
    """Mean over aligned starts of the most units one channel moves for an ``n``-unit read (plain loops)."""
    period = pu * channels
    span = n * period // math.gcd(n, period)  # the start pattern repeats after lcm(n, period) units
    worst = []
    for start in range(0, span, n):
        per = [0] * channels
        for x in range(start, start + n):
            per[((phase + x) // pu) % channels] += 1
        worst.append(max(per))
    return sum(worst) / len(worst)


def curve(pu, channels, phase, t_r, chan_mb_s, host_mb_s=None, sizes=SWEEP):
    u_c = UNIT / chan_mb_s  # us: bytes / (10^6 bytes/s)
    u_h = UNIT / host_mb_s if host_mb_s else 0.0
    out = {}
    for s in sizes:
        n = s // UNIT
        out[s] = max(t_r + naive_busiest(n, pu, channels, phase) * u_c + u_h, n * u_h)
    return out


def test_busiest_channel_by_hand():
    """pu = 4 units, 2 channels, phase 2: units 2-3 on channel 0, 4-7 on channel 1, 8-11 on channel 0, ..."""
    # 4 units from 0: positions 2..5 -> 2 on ch0, 2 on ch1; from 4: 6..9 -> 2 and 2: the busiest moves 2, not 4
    assert naive_busiest(4, 4, 2, 2) == 2.0
    assert R.busiest_channel_units(4, 4, 2, 2) == 2.0
    assert R.busiest_channel_units(4, 4, 2, 0) == 4.0  # aligned: one program unit, one channel
    # 8 units from 0: positions 2..9 -> ch0 gets 2,3,8,9 and ch1 gets 4..7: 4
    assert R.busiest_channel_units(8, 4, 2, 2) == 4.0
    assert R.busiest_channel_units(1, 4, 2, 3) == 1.0


def test_exact_curve_off_phase_comes_back_exactly():
    """16 KiB program units, 4 channels, the fill's second pass at stripe phase 2 (user capacity 8002 units).

    At phase 2 a 16 KiB read splits over two channels (k = 1, 2, 2, 4 for 4k..32k, not 1, 2, 4, 4): a
    fit that ignores the phase sees a different curve and cannot land on 50 us / 400 MB/s. Channels: the
    fewest over which every size fits (32k may span 3 program units: 4; 8 fits them alike, ties go to fewer).
    """
    user_units = 8002
    assert [naive_busiest(s // UNIT, 4, 4, 2) for s in STRIPE4] == [1, 2, 2, 4]
    lat = curve(pu=4, channels=4, phase=user_units % 16, t_r=50.0, chan_mb_s=400.0, sizes=STRIPE4)
    got = R.fit_read_curve(lat, user_units)
    assert (got["page_bytes"], got["channels"]) == (16384, 4)
    assert got["read_us"] == pytest.approx(50.0, rel=1e-9)
    assert got["channel_mb_s"] == pytest.approx(400.0, rel=1e-9)
    assert got["host_mb_s"] is None
    assert got["rms_error"] == pytest.approx(0.0, abs=1e-9)


def test_exact_link_bound_curve_comes_back_exactly():
    """64 KiB program units on 2 channels at phase 2, tR 40 us, 800 MB/s channels, a 256 MB/s link (u_h = 16 us).

    By hand: u_c = 5.12 us. 4 KiB reads never straddle a program unit (k = 1), nor 8 KiB ones at an even
    phase (k = 2); a 16 KiB read starts at stripe positions 2, 6, 10, 14 (mod 16) and straddles at 14, so
    k = (3 x 4 + 2) / 4 = 3.5. Latencies 40 + 5.12 k + 16: 61.12, 66.24, 73.92 us; from 32 KiB on the
    link bounds every read (8 x 16 = 128 us > 40 + 8 x 5.12 + 16). A fit without the link must take 32 KiB
    on the same line as 16 KiB (it spans at most 2 program units) or change the program unit, whose k
    pattern then differs (16 KiB units: 1, 2, 2): only the link fits exactly. The intercept is tR + u_h: tR
    must come back without the link's 16 us. Channels: the fewest over which 16 KiB fits (2).
    """
    user_units = 8002
    assert [naive_busiest(n, 16, 2, user_units % 32) for n in (1, 2, 4)] == [1, 2, 3.5]
    lat = curve(pu=16, channels=2, phase=user_units % 32, t_r=40.0, chan_mb_s=800.0, host_mb_s=256.0)
    assert [round(lat[s], 6) for s in SWEEP[:4]] == [61.12, 66.24, 73.92, 128.0]
    got = R.fit_read_curve(lat, user_units)
    assert (got["page_bytes"], got["channels"]) == (65536, 2)
    assert got["read_us"] == pytest.approx(40.0, rel=1e-9)
    assert got["channel_mb_s"] == pytest.approx(800.0, rel=1e-9)
    assert got["host_mb_s"] == pytest.approx(256.0, rel=1e-9)


def test_noisy_curve_is_a_relative_least_squares_line():
    """One point 0.1 % high: the line is the least squares of *relative* errors, sum ((y - a - b k) / y)^2.

    The configuration (16 KiB units, 4 channels, phase 0) stays the best (RMS log error ~3e-4 rounds to 0,
    and it fits the most sizes); the fitted sizes are 4k..32k (at most 3 program units, k = 1, 2, 4, 4), and a, b solve the 2 x 2 weighted normal equations written out below.
    """
    lat = curve(pu=4, channels=4, phase=0, t_r=60.0, chan_mb_s=500.0, sizes=STRIPE4)
    lat[8192] *= 1.001
    got = R.fit_read_curve(lat, 16 * 1000)
    assert (got["page_bytes"], got["channels"]) == (16384, 4)
    pts = [(1.0, lat[4096]), (2.0, lat[8192]), (4.0, lat[16384]), (4.0, lat[32768])]
    # minimise sum w (y - a - b k)^2 with w = 1 / y^2 (y: a latency)
    sw = sum(1 / y**2 for _, y in pts)
    sk = sum(k / y**2 for k, y in pts)
    skk = sum(k * k / y**2 for k, y in pts)
    sl = sum(y / y**2 for _, y in pts)
    skl = sum(k * y / y**2 for k, y in pts)
    det = sw * skk - sk * sk
    a = (skk * sl - sk * skl) / det
    b = (sw * skl - sk * sl) / det
    assert got["read_us"] == pytest.approx(a, rel=1e-9)
    assert got["channel_mb_s"] == pytest.approx(UNIT / b, rel=1e-9)
    assert 0 < got["rms_error"] < 5e-4


def test_read_error_puts_the_worst_job_first(monkeypatch):
    """Simulated / measured = 2, 1, 1, 1: largest |log| ln 2, RMS sqrt(ln(2)^2 / 4) = ln(2) / 2; that order."""
    sim = {"a": 200.0, "b": 100.0, "c": 50.0, "d": 10.0}
    monkeypatch.setattr(R, "run_job", lambda cfg, job: {"bw_mb_s": sim[job]})
    worst, rms = R._read_error(None, {"a": 100.0, "b": 100.0, "c": 50.0, "d": 10.0})
    assert worst == pytest.approx(math.log(2), rel=1e-12)
    assert rms == pytest.approx(math.log(2) / 2, rel=1e-12)
