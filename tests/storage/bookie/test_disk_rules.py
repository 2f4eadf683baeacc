"""When a bookie turns read-only and back (LedgerDirsMonitor's rules), as a pure function."""

from __future__ import annotations

from storage.bookie.registration import DiskSettings, next_readonly


def test_full_at_the_threshold_and_writable_below_the_low_water_mark() -> None:
    settings = DiskSettings()  # 0.95, low-water mark defaults to the same
    assert not next_readonly(settings, 0.94, readonly=False)
    assert next_readonly(settings, 0.95, readonly=False)
    assert next_readonly(settings, 0.95, readonly=True)
    assert not next_readonly(settings, 0.949, readonly=True)


def test_a_lower_low_water_mark_keeps_the_bookie_read_only_longer() -> None:
    settings = DiskSettings(diskUsageLwmThreshold=0.85)
    assert next_readonly(settings, 0.90, readonly=True)
    assert not next_readonly(settings, 0.84, readonly=True)
    assert not next_readonly(settings, 0.90, readonly=False)  # not full yet


def test_read_only_mode_disabled_never_switches() -> None:
    assert not next_readonly(DiskSettings(readOnlyModeEnabled=False), 0.99, readonly=False)


def test_the_force_readonly_flag_wins_over_usage_and_settings() -> None:
    assert next_readonly(DiskSettings(), 0.1, readonly=False, forced=True)
    assert next_readonly(DiskSettings(readOnlyModeEnabled=False), 0.1, readonly=True, forced=True)
