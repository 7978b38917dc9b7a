"""The writer thread's side of a SummaryRecord: encoded steps into its files, durably.

Everything here runs on the pipeline's one writer thread (``_pipeline.py``), in step
order. Each encoded step is appended to the summary, lineage and TensorBoard streams
and its tensors are exported; no failed write ends the thread: the record's
:class:`WriteErrorPolicy` hands the error to the caller's next call
(``raise_exception``) or logs it. A durable sync notes what is on disk as of that
sync, which ``flush()`` reports (``docs/file-format.md``, "Durability").
"""

from __future__ import annotations

from rankscribe.writer.encoding._steps import EncodedStep
from rankscribe.writer.errors import WriterError
from rankscribe.writer.record._export import NpyExporter
from rankscribe.writer.record._files import RecordFiles
from rankscribe.writer.record._scalar_batches import EncodedBatch
from rankscribe.writer.record._write_errors import WriteErrorPolicy


class StepWriter:
    """Writes one record's encoded steps into its :class:`RecordFiles` and ``.npy`` export."""

    def __init__(
        self, files: RecordFiles, exporter: NpyExporter | None, errors: WriteErrorPolicy
    ) -> None:
        self._files = files
        self._summary, self._lineage, self._board = files.summary, files.lineage, files.board
        self._exporter = exporter
        self._errors = errors
        #: ``RecordFiles.disk_state`` at the last durable sync: what a flush, once its
        #: sync is done, reports (the state at its place in the queue, not of steps
        #: recorded after it).
        self.disk_state = (0, 0, 0)

    def write(self, encoded: EncodedStep | list[tuple[int, bytes]] | EncodedBatch) -> None:
        """Append one encoded step, steps of scalars (one event each), or a batch of
        both, in order."""
        if isinstance(encoded, EncodedBatch):
            for part in encoded.parts:
                if isinstance(part, list):
                    self._write_scalars(part)
                else:
                    self._write_step(part)
        elif isinstance(encoded, list):
            self._write_scalars(encoded)
        else:
            self._write_step(encoded)

    def _write_scalars(self, encoded: list[tuple[int, bytes]]) -> None:
        """Append steps of scalars, one event each."""
        assert self._summary is not None
        if self._summary.append_buffered([event for _, event in encoded]):
            return  # framed into the buffer whole: nothing written, nothing to fail
        append = self._summary.append
        for scalar_step, event in encoded:
            try:
                append(event)
            except (OSError, WriterError) as error:
                self._errors.failed("summary", error, scalar_step)

    def _write_step(self, encoded: EncodedStep) -> None:
        """Append one encoded step to each of its files."""
        assert isinstance(encoded, EncodedStep)
        guarded = self._errors.guarded
        step = encoded.step
        if self._summary is not None:
            for payload in encoded.summary:
                guarded("summary", step, self._summary.append, payload)
        for payload in encoded.lineage:
            guarded("lineage", step, self._lineage.append, payload)
        if self._board is not None:
            for payload in encoded.tensorboard:
                guarded("tensorboard", step, self._board.append, payload)
        if self._exporter is not None:
            for tag, array in encoded.exports:
                guarded("export", step, self._exporter.export, tag, step, array)

    def sync(self, durable: bool) -> None:
        """Hand buffered bytes to the OS; with ``durable``, fsync them and note the state."""
        for stream in self._files.streams:
            action = stream.sync if durable else stream.write_buffered
            self._errors.guarded("sync", None, action)
        if durable:
            self.disk_state = self._files.disk_state(self._errors.failures)

    def close(self) -> None:
        """Close the files (now read-only) and release the export folder.

        Called once the writer thread has stopped; a failure is handled as any write's.
        """
        for stream in self._files.streams:
            self._errors.guarded("close", None, stream.close)
        if self._exporter is not None:
            self._exporter.release()
