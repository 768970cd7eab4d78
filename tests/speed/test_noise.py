"""Session noise (`hfrelease.speed.noise`): Student's t, the pooled A/A variance, and which records are A/A."""

from __future__ import annotations

import math

import pytest

from hfrelease.ledger.record import LedgerRecord
from hfrelease.speed.noise import host_noise, ledger_noise, pooled, sessions, t_quantile
from tests.ledger_pairs import write_ledger, write_speed

pytestmark = pytest.mark.unit


def test_t_quantiles_are_students() -> None:
    """The 0.975 quantiles printed in every t table (df 1, 2, 4, 10, 30) and, past the table, the expansion
    (df 60: 2.000298, df 120: 1.979930)."""
    expected = {1: 12.706205, 2: 4.302653, 4: 2.776445, 10: 2.228139, 30: 2.042272, 60: 2.000298, 120: 1.979930}
    for df, value in expected.items():
        assert t_quantile(df) == pytest.approx(value, abs=2e-6), df
    with pytest.raises(ValueError):
        t_quantile(0)


def test_pooled_variance_centres_each_group_on_its_own_mean() -> None:
    """Two groups at very different speeds, each spread 10 % the same way: s is that spread in ln, df 1 + 2;
    a group of one session adds nothing, and no group of two is no estimate at all."""
    noise = pooled({"slow": [10.0, 11.0], "fast": [100.0, 110.0, 105.0], "once": [50.0]})
    assert noise is not None and noise.df == 3 and noise.groups == ("fast", "slow")
    logs = [[math.log(10), math.log(11)], [math.log(100), math.log(110), math.log(105)]]
    squares = sum((x - sum(g) / len(g)) ** 2 for g in logs for x in g)
    assert noise.sigma == pytest.approx(math.sqrt(squares / 3))
    low, high = noise.log_interval(100.0, 150.0, sessions_new=2)
    half = t_quantile(3) * noise.sigma * math.sqrt(1 + 1 / 2)
    assert (low, high) == pytest.approx((math.log(1.5) - half, math.log(1.5) + half))
    assert pooled({"once": [50.0], "other": [60.0]}) is None


def test_a_key_recorded_twice_on_one_host_is_one_aa_group(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Sessions are grouped by input key and hardware: the same key on another CPU is not an A/A pair, and the
    noise of a host only reads that host's groups."""
    ledger = write_ledger(tmp_path)
    first = write_speed(ledger, throughputs=(100.0, 101.0, 99.0))
    second = write_speed(ledger, throughputs=(120.0, 121.0, 119.0), step=1)
    xeon = write_speed(ledger, throughputs=(300.0, 301.0, 299.0), step=2, cpu="Intel Xeon")
    xeon_again = write_speed(ledger, throughputs=(150.0, 151.0, 149.0), step=3, cpu="Intel Xeon")
    records: list[LedgerRecord] = ledger.records()
    groups = sessions(records)
    assert sorted(len(found) for found in groups.values()) == [2, 2]
    assert [first, second] in groups.values()
    epyc = host_noise(records, [first])
    assert epyc is not None and epyc.df == 1
    assert epyc.sigma == pytest.approx(math.log(120.0 / 100.0) / math.sqrt(2))
    both = ledger_noise(records)
    assert both is not None and both.df == 2 and len(both.groups) == 2
    assert host_noise(records, [xeon, xeon_again]) != epyc
