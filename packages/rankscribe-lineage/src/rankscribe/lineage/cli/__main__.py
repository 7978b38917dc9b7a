"""``python -m rankscribe.lineage.cli``: the same as the ``rankscribe-lineage`` command."""

import sys

from rankscribe.lineage.cli import main

sys.exit(main())
