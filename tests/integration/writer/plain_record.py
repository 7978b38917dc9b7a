"""Run by every rank of tests/integration/writer/test_mpi_plain_record.py under mpiexec.

A plain SummaryRecord into one directory shared by all ranks, as a new user writes it,
then one per rank into rankscribe.ranks.rank_dir(), as the warning advises.
"""

import sys
from pathlib import Path

from rankscribe.ranks import detect, rank_dir
from rankscribe.writer import SummaryRecord

base = Path(sys.argv[1])
with SummaryRecord(base / "shared") as record:
    for step in range(1, 31):
        record.add_value("scalar", "loss", 1.0 / step)
        record.record(step)
with SummaryRecord(rank_dir(base / "own", detect())) as record:
    for step in range(1, 31):
        record.add_value("scalar", "loss", 1.0 / step)
        record.record(step)
