"""What the framework integrations share: driving the collector from another loop's hooks.

Owns :class:`~rankscribe.collector.frameworks._driver.FrameworkRun` (a
framework's hooks told to the collector as a ``TrainLoop``'s callback events)
and the agreement on a run's directory. The public integration modules
(``rankscribe.collector.lightning``, ``.transformers``, ``.accelerate``) sit
above it and import their framework; this package never does.
May import: the collector's core modules, ``rankscribe.ranks``, ``rankscribe.writer``.
"""

__all__: list[str] = []
