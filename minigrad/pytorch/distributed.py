"""Data parallelism over MPI (`mpiexec -n 4 python train.py --dist mpi`): rank 0's parameters are broadcast, every rank
trains on its slice of each batch, and all_reduce sums the gradients, so every rank makes the same step. mpi4py
(the mpi extra) moves NumPy arrays through its buffer interface; CuPy arrays go through NCCL where CuPy has it.
docs/data-parallel.md explains it; a plain `python` process is a world of one.
"""

from __future__ import annotations

import atexit
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from minigrad.array import backend

INSTALL = "pip install mpi4py mpich (or pip install -e '.[mpi]')"


class World:
    """The processes training together: this one's `rank`, their number, `size`, and how many of them
    share this machine, `ranks_on_node`.

    World() is a world of one without MPI, where every collective returns at once. init() joins the
    MPI job this process was started in.
    """

    def __init__(self, comm: Any = None, nccl_comm: Any = None, ranks_on_node: int = 1) -> None:
        self.comm = comm  # an mpi4py communicator, None for a world of one
        self.nccl_comm = nccl_comm  # a cupy.cuda.nccl.NcclCommunicator over the same ranks, or None
        self.rank = 0 if comm is None else comm.Get_rank()
        self.size = 1 if comm is None else comm.Get_size()
        self.ranks_on_node = ranks_on_node

    def all_reduce(self, arrays: Sequence[Any]) -> None:
        """Replace each array, on every rank, by its sum over all ranks (in place)."""
        self._each(arrays, self._mpi_all_reduce, self._nccl_all_reduce)

    def broadcast(self, arrays: Sequence[Any]) -> None:
        """Overwrite each array, on every rank, with rank 0's (in place)."""
        self._each(arrays, self._mpi_broadcast, self._nccl_broadcast)

    def all_gather(self, value: Any) -> list[Any]:
        """Every rank's `value` (a small Python object), in rank order, on every rank."""
        return [value] if self.comm is None else self.comm.allgather(value)

    def barrier(self) -> None:
        """Return once every rank has called barrier()."""
        if self.comm is not None:
            self.comm.Barrier()

    @contextmanager
    def failing_together(self) -> Iterator[None]:
        """Inside, an exception that ends this rank ends the whole job as this process exits (MPI_Abort),
        rather than leave the other ranks waiting forever in a collective for a rank that has gone."""
        try:
            yield
        except BaseException as err:
            if self.size > 1:  # atexit: after the error has been reported; 130 for Ctrl-C, as the shell's
                atexit.register(self._abort, 130 if isinstance(err, KeyboardInterrupt) else 1)
            raise

    def _abort(self, code: int) -> None:
        """MPI_Abort, once this rank's report has left: mpiexec stops forwarding output when it kills the job, so
        the report's last lines could be lost in its pipes without the short wait."""
        sys.stdout.flush()
        sys.stderr.flush()
        time.sleep(0.2)
        self.comm.Abort(code)

    def _each(self, arrays: Sequence[Any], on_host: Callable[[Any], None], on_gpu: Callable[[Any], None]) -> None:
        """Run a collective on each array (one message each; big frameworks pack gradients into buckets, since each
        message also pays the latency), through a contiguous copy where the array is not contiguous."""
        if self.size == 1:
            return
        for array in arrays:
            buf = backend.get_array_module(array).ascontiguousarray(array)  # `array` itself if contiguous
            if backend.device_of(buf) == "cpu":
                on_host(buf)
            elif self.nccl_comm is not None:
                on_gpu(buf)
            else:  # a GPU array without NCCL: through host memory
                host = backend.to_numpy(buf)
                on_host(host)
                buf.set(host)
            if buf is not array:
                array[...] = buf

    def _mpi_all_reduce(self, buf: Any) -> None:
        from mpi4py import MPI

        self.comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)

    def _mpi_broadcast(self, buf: Any) -> None:
        self.comm.Bcast(buf, root=0)

    def _nccl_all_reduce(self, buf: Any) -> None:
        nccl = _nccl()
        stream = backend.cupy.cuda.get_current_stream().ptr
        self.nccl_comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, _nccl_dtype(buf), nccl.NCCL_SUM, stream)

    def _nccl_broadcast(self, buf: Any) -> None:
        stream = backend.cupy.cuda.get_current_stream().ptr
        self.nccl_comm.bcast(buf.data.ptr, buf.size, _nccl_dtype(buf), 0, stream)


def _nccl() -> Any:
    """CuPy's NCCL module, or None where CuPy was built or installed without NCCL."""
    try:
        from cupy.cuda import nccl
    except ImportError:
        return None
    return nccl if nccl.available else None


def _nccl_dtype(buf: Any) -> int:
    nccl = _nccl()
    types = {"float32": nccl.NCCL_FLOAT32, "float64": nccl.NCCL_FLOAT64}
    if buf.dtype.name not in types:
        raise TypeError(f"distributed: NCCL collectives take float32 or float64 arrays, got {buf.dtype}")
    return types[buf.dtype.name]


def init(device: str = "cpu") -> World:
    """Join the MPI job this process was started in (mpiexec -n N python ...): a world of N ranks, a plain process
    a world of one; with device "cuda" each rank takes its own GPU (and NCCL where CuPy has it). A RuntimeError
    says what to install when mpi4py or the MPI library is missing."""
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError) as err:  # RuntimeError: mpi4py found no MPI library
        raise RuntimeError(f"MPI is not available ({err}); install it: {INSTALL}") from None
    comm = MPI.COMM_WORLD
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)  # the ranks on this rank's node
    if backend.check_device(device) == "cpu" or comm.Get_size() == 1:
        return World(comm, ranks_on_node=node.Get_size())
    gpus = backend.cupy.cuda.runtime.getDeviceCount()
    backend.cupy.cuda.Device(node.Get_rank() % gpus).use()
    nccl = _nccl()
    # NCCL wants a GPU of its own for each rank; every rank must make the same choice
    if not comm.allreduce(nccl is not None and node.Get_size() <= gpus, op=MPI.LAND):
        return World(comm, ranks_on_node=node.Get_size())
    uid = comm.bcast(nccl.get_unique_id() if comm.Get_rank() == 0 else None, root=0)  # 128 bytes, once
    return World(comm, nccl.NcclCommunicator(comm.Get_size(), uid, comm.Get_rank()), node.Get_size())


# ---- torch.distributed's names, for programs that import them (nanoGPT's train.py does, unconditionally) ----

ALTERNATIVE = ("minigrad's data parallelism runs over MPI instead: mpiexec -n 4 python train.py --dist mpi, or "
               "world = mg.distributed.init() in a program of your own (docs/data-parallel.md)")


def init_process_group(backend: str | None = None, *args: Any, **kwargs: Any) -> None:
    """Refused in one line: torch.distributed's process groups (torchrun, NCCL, Gloo) are not run here."""
    raise RuntimeError(f"init_process_group: torch.distributed's process groups are not supported; {ALTERNATIVE}")


def destroy_process_group(group: Any = None) -> None:
    """As PyTorch's without init_process_group: there is no default group to destroy."""
    raise ValueError("destroy_process_group: the default process group has not been initialized (minigrad has no "
                     "process groups: init_process_group is refused)")


def is_initialized() -> bool:
    """False: no torch.distributed process group is ever made here."""
    return False
