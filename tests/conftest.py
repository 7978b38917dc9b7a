"""Settings shared by every test folder."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# CI has 2 shared cores: property tests run fewer, deadline-free examples there.
settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=200, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
