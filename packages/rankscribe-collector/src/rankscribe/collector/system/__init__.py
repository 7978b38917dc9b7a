"""Every rank's machine: its process, host and accelerator, sampled off the training thread.

Owns the ``rankscribe/system/*`` readings (``_readings``: psutil for the
process and host, NVML through NVIDIA's ``nvidia-ml-py`` for the accelerator,
imported only when present) and the background thread that takes them every
``system_interval`` seconds (``_sampler``). Semantics in
``docs/system-metrics.md``; the tags' names, and the evidence a straggler
verdict cites from them, are the job view's (``rankscribe/jobview/job/verdicts/_machine.py``).

May import: ``rankscribe.collector.errors``, the lineage package's job view
(the tag names), psutil, pynvml. Not the collector's training-loop modules.
"""

__all__: list[str] = []  # the modules inside are private; the collector uses them
